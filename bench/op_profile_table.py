#!/usr/bin/env python3
"""GPU milliseconds per op class per 1,000 tokens, side by side for several
`lazytrain train` runs made with LT_OP_PROFILE=1 (each metrics.jsonl line
then has "op_ms": {class: ms}). Steps after the first; the median step's
figures per class. Usage: op_profile_table.py NAME=metrics.jsonl ..."""
import json
import statistics
import sys


def per_kilotoken(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    rows = [r for r in rows[1:] if "op_ms" in r]
    if not rows:
        return {}, 0
    classes = {c for r in rows for c in r["op_ms"]}
    table = {c: statistics.median(r["op_ms"].get(c, 0.0) / r["tokens"] * 1000 for r in rows)
             for c in classes}
    step = statistics.median(r["step_s"] / r["tokens"] * 1e6 for r in rows)  # ms per 1k tokens
    return table, step


def main():
    runs = [arg.split("=", 1) for arg in sys.argv[1:]]
    tables = {name: per_kilotoken(path) for name, path in runs}
    classes = sorted({c for t, _ in tables.values() for c in t},
                     key=lambda c: -max(t.get(c, 0) for t, _ in tables.values()))
    names = [name for name, _ in runs]
    print("| op class (GPU ms per 1k tokens) | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for c in classes:
        print(f"| {c} | " + " | ".join(f"{tables[n][0].get(c, 0):.3f}" for n in names) + " |")
    print("| sum of classes | " + " | ".join(f"{sum(tables[n][0].values()):.3f}" for n in names) + " |")
    print("| wall step | " + " | ".join(f"{tables[n][1]:.3f}" for n in names) + " |")


if __name__ == "__main__":
    main()
