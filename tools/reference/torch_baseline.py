#!/usr/bin/env python3
"""PyTorch's training step for the benchmark's model, measured the way
lazytrain's bench (tests/gpu/resident_gpu_test.cpp, ResidentBench) measures.

    python3 tools/reference/torch_baseline.py bench/models/qwen2.5-3b/config.json \
        [--batch 8] [--seq 1024] [--steps 6] [--warmup 2] [--layers N] [--compile]

transformers' AutoModelForCausalLM (Qwen2ForCausalLM, GPT2LMHeadModel, ...)
built from the same config.json with random weights (f32 parameters on the
GPU), bf16 autocast, sdpa attention, torch.optim.AdamW(fused=True), gradient clipping at 1.0, one micro-batch of
batch x seq random tokens with labels = input_ids (seq - 1 predictions per
row). Median step time over `steps` steps after `warmup`, tokens/s, TFLOP/s
by 6 N tokens (N = every parameter, tied embeddings once) and the peak of
torch.cuda.max_memory_allocated (and reserved). Prints one RESULT line of
JSON (system "pytorch", or "pytorch-compile" with --compile, whose warm-up
steps include the compilation; tokens_per_s_wall: the timed steps' tokens
over their summed time); --profile adds a torch.profiler table of one more
step.

Under torchrun (WORLD_SIZE > 1) it is PyTorch DDP, the peer of lazytrain's
data parallel: each rank on GPU LOCAL_RANK with --batch sequences of its own
(the per-GPU batch), gradients all-reduced by DDP over NCCL; rank 0 prints
the RESULT with the global tokens a step (system "pytorch-ddp", "world"):
    NCCL_NVLS_ENABLE=0 torchrun --nproc-per-node 2 tools/reference/torch_baseline.py CONFIG
"""
import argparse
import json
import os
import statistics
import time

import torch
import transformers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    a = ap.parse_args()

    config = transformers.AutoConfig.from_pretrained(a.config)
    if a.layers:
        config.num_hidden_layers = a.layers
    config._attn_implementation = "sdpa"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        torch.distributed.init_process_group("nccl")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    model = model.float().cuda()
    model.train()
    n_params = sum(p.numel() for p in model.parameters())  # tied weight listed once
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, fused=True)
    wrapped = model
    if world > 1:
        wrapped = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    forward = torch.compile(wrapped) if a.compile else wrapped
    gen = torch.Generator(device="cuda").manual_seed(9 + rank)

    def step():
        ids = torch.randint(0, config.vocab_size, (a.batch, a.seq), device="cuda", generator=gen)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = forward(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times = []
    torch.cuda.reset_peak_memory_stats()
    for s in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if rank == 0:
            print(f"step {s}: loss {float(loss):.4f} {dt:.3f} s", flush=True)
        if s >= a.warmup:
            times.append(dt)
    tokens = a.batch * a.seq * world  # a step's tokens over every rank
    med = statistics.median(times)
    if rank != 0:
        torch.distributed.destroy_process_group()
        return
    system = "pytorch-compile" if a.compile else "pytorch"
    result = {
        "system": system + ("-ddp" if world > 1 else ""), "world": world, "torch": torch.__version__, "transformers": transformers.__version__,
        "params": n_params, "layers": config.num_hidden_layers, "batch": a.batch, "seq": a.seq,
        "steps": a.steps, "median_step_s": round(med, 4), "tokens_per_s": round(tokens / med, 1),
        "tokens_per_s_wall": round(tokens * len(times) / sum(times), 1),
        "tflops": round(6 * n_params * tokens / med / 1e12, 1),
        "peak_gb": round(torch.cuda.max_memory_allocated() / 1e9, 2),
        "reserved_gb": round(torch.cuda.max_memory_reserved() / 1e9, 2),
    }
    print("RESULT " + json.dumps(result), flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()

    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25))


if __name__ == "__main__":
    main()
