#!/usr/bin/env python3
"""PyTorch's CPU AdamW throughput, the baseline for bench/optim_bench.cpp.

Same setup as optim_bench: N f32 parameters as 8 equal tensors, f32
gradients, 2 warm-up steps, then R timed steps; prints the median in
G params/s for torch.optim.AdamW with foreach=True (the default on CPU
tensors is the for-loop path; foreach is the faster one).
Usage: torch_cpu_adamw.py [--params N] [--runs R] [--threads T]
"""
import argparse
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=int, default=64 * 2**20)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    per = args.params // 8
    params = [torch.nn.Parameter(torch.randn(per) * 0.02) for _ in range(8)]
    for p in params:
        p.grad = torch.randn(per) * 1e-3
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01, foreach=True)
    times = []
    for i in range(2 + args.runs):
        t = time.perf_counter()
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - t)
    med = statistics.median(times)
    print(f"RESULT torch {torch.__version__} adamw foreach threads {torch.get_num_threads()} "
          f"params {per * 8} median {med:.4f} s = {per * 8 / med / 1e9:.3f} G params/s "
          f"(min {min(times):.4f}, max {max(times):.4f})")


if __name__ == "__main__":
    main()
