#!/usr/bin/env python3
"""PyTorch's causal attention at the shapes of lazytrain's AttentionBench.

torch.nn.functional.scaled_dot_product_attention, bf16, is_causal=True,
B=8, T=2048, 16 query heads over 2 kv heads (enable_gqa), head_dim 128, in
lazytrain's layout [B, T, H, D] transposed to torch's [B, H, T, D] (a view,
as a model would pass it). Times the forward and forward+backward with CUDA
events, median of 15 calls after 3 warm-ups, and prints TFLOP/s with the
same FLOP counts as tests/gpu/attention_gpu_test.cpp (forward 4 B H T^2 D / 2,
backward 2.5 times that; the backward time is fwd+bwd minus fwd).
"""
import statistics

import torch
import torch.nn.functional as F

B, T, HQ, HKV, D = 8, 2048, 16, 2, 128
WARMUP, SAMPLES = 3, 15


def median_ms(fn):
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(SAMPLES):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    torch.manual_seed(0)
    dev = torch.device("cuda")
    q = torch.randn(B, T, HQ, D, device=dev, dtype=torch.bfloat16).transpose(1, 2)
    k = torch.randn(B, T, HKV, D, device=dev, dtype=torch.bfloat16).transpose(1, 2)
    v = torch.randn(B, T, HKV, D, device=dev, dtype=torch.bfloat16).transpose(1, 2)
    dout = torch.randn(B, HQ, T, D, device=dev, dtype=torch.bfloat16)
    q.requires_grad_(True)
    k.requires_grad_(True)
    v.requires_grad_(True)

    def fwd():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    def fwd_bwd():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        torch.autograd.grad(out, (q, k, v), dout)

    fwd_ms = median_ms(fwd)
    total_ms = median_ms(fwd_bwd)
    bwd_ms = total_ms - fwd_ms
    fwd_flops = 4.0 * B * HQ * T * T * D / 2
    bwd_flops = 2.5 * fwd_flops
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    for what, flops, ms in (("fwd", fwd_flops, fwd_ms), ("bwd", bwd_flops, bwd_ms),
                            ("fwd+bwd", fwd_flops + bwd_flops, total_ms)):
        print(f"torch sdpa attention {what:<8} B={B} T={T} Hq={HQ} Hkv={HKV} D={D} causal: "
              f"{ms:8.3f} ms {flops / (ms * 1e-3) / 1e12:7.1f} TFLOP/s")


if __name__ == "__main__":
    main()
