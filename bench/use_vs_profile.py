#!/usr/bin/env python3
"""A streaming run's compute per stage use, from its trace, against the profile it was priced with.

Issue 27: the planner priced chunks of 32 6% slow where chunks of 8 came
within 1% (session 31). This reads out.dir/trace.json (the compute spans,
one per use: "forward block.3", "backward block.3", "head head", ...) and
the hardware profile's stage_times (seconds for a chunk of each measured
size, piecewise linear between them), and prints per kind of use the
median measured span over the traced steps against the profile's price for
the run's chunks. The first traced step is skipped (warm-up).

A fused tail ("tail block.N": its T blocks and the head, chunk by chunk)
is priced as the cost model prices it: T blocks' backward use plus their
output GEMM at the forward's rate, and the head's step.

Usage: bench/use_vs_profile.py TRACE_JSON PROFILE_YAML BATCH CHUNK [TAIL_BLOCKS]
"""
import json
import statistics
import sys
from collections import defaultdict

import yaml


def curve_at(sizes, seconds, batch):
    """The profile's seconds at `batch`: piecewise linear through (sizes, seconds)."""
    points = list(zip(sizes, seconds))
    for (b0, s0), (b1, s1) in zip(points, points[1:]):
        if batch <= b1 or (b1, s1) == points[-1]:
            return s0 + (s1 - s0) * (batch - b0) / (b1 - b0)
    return points[-1][1]


def output_gemm_share(t):
    """A block's output GEMM over its forward's FLOPs (cost_model.cpp's ratio)."""
    h, ffn, heads, kv, hd, seq = (t[k] for k in ("hidden_size", "intermediate_size",
                                                 "num_attention_heads", "num_key_value_heads",
                                                 "head_dim", "seq_len"))
    params = h * heads * hd * 2 + 2 * h * kv * hd + 3 * h * ffn
    per_token = 2 * params + 2 * seq * heads * hd
    return 2 * ffn * h / per_token


def main(trace_path, profile_path, batch, chunk, tail_blocks):
    times = yaml.safe_load(open(profile_path))["stage_times"]
    sizes = times["batch_sizes"]
    chunks = batch // chunk

    def price(curve):
        values = times[curve]
        if len(sizes) == 2 and len(values) == 2:  # the older [a, b] line
            a, b = values
            return chunks * (a + b * chunk)
        return chunks * curve_at(sizes, values, chunk)

    events = json.load(open(trace_path))["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    spans = sorted((e for e in events if e["ph"] == "X" and tracks.get(e["tid"]) == "compute"),
                   key=lambda e: e["ts"])
    # Steps: a new one starts at each "forward embed" (or the first forward).
    steps, current = [], []
    for e in spans:
        if e["name"] == "forward embed" and current:
            steps.append(current)
            current = []
        current.append(e)
    if current:
        steps.append(current)
    by_kind = defaultdict(list)
    for step in steps[1:] or steps:
        for e in step:
            work, stage = e["name"].split(" ", 1)
            kind = f"{work} {'block' if stage.startswith('block.') else stage}"
            by_kind[kind].append(e["dur"] / 1e6)
    priced = {
        "forward block": price("block_forward"),
        "recompute block": price("block_forward"),
        "backward block": price("block_backward"),
        "head head": price("head_step"),
        "forward embed": price("embed_forward"),
        "backward embed": price("embed_backward"),
        "tail block": tail_blocks * (price("block_backward") +
                                     price("block_forward") * output_gemm_share(times)) +
        price("head_step") if tail_blocks else None,
    }
    print(f"{trace_path}: batch {batch} in chunks of {chunk}; {len(steps)} steps traced, "
          f"{max(len(steps) - 1, 1)} used; profile batch sizes {sizes}")
    print(f"{'use':<18}{'count':>7}{'median ms':>11}{'priced ms':>11}{'diff':>8}{'sum a step s':>14}")
    n_steps = max(len(steps) - 1, 1)
    for kind in sorted(by_kind):
        values = by_kind[kind]
        med = statistics.median(values) * 1e3
        p = priced.get(kind)
        diff = f"{(p * 1e3 / med - 1) * 100:+.1f}%" if p else ""
        print(f"{kind:<18}{len(values):>7}{med:>11.2f}{(p or 0) * 1e3:>11.2f}{diff:>8}"
              f"{sum(values) / n_steps:>14.3f}")
    total = sum(sum(v) for v in by_kind.values()) / n_steps
    print(f"compute spans a step: {total:.3f} s")


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
         int(sys.argv[5]) if len(sys.argv) == 6 else 0)
