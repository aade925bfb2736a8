#!/usr/bin/env python3
"""The streaming executor's update chase, from its trace (out.dir/trace.json).

With exact clipping every stage's CPU update starts when the backward ends,
and the next step's forward waits for each stage's update before it runs the
stage. This prints, per traced step, how long the optimizer thread was busy
and over what span, and how long the next forward's compute was busy in the
same window: when the updates take longer than the forward, the difference
is the step's exposed optimizer time.

Usage: bench/update_chase.py OUT_DIR/trace.json [more traces]
"""
import json
import sys

GAP_US = 200_000  # updates of one step run back to back; steps are far apart


def groups_of(spans):
    spans = sorted(spans, key=lambda e: e["ts"])
    groups = []
    for e in spans:
        if groups and e["ts"] - (groups[-1][-1]["ts"] + groups[-1][-1]["dur"]) <= GAP_US:
            groups[-1].append(e)
        else:
            groups.append([e])
    return groups


def main(paths):
    for path in paths:
        events = json.load(open(path))["traceEvents"]
        tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
        spans = [e for e in events if e["ph"] == "X"]
        updates = [e for e in spans if tracks[e["tid"]] == "optimizer"]
        forwards = [e for e in spans if tracks[e["tid"]] == "compute"
                    and e["name"].startswith(("forward", "head"))]
        print(path)
        for g in groups_of(updates):
            start, end = g[0]["ts"], g[-1]["ts"] + g[-1]["dur"]
            busy = sum(e["dur"] for e in g)
            line = (f"  updates: {len(g)} tasks over {(end - start) / 1e3:.0f} ms "
                    f"(busy {busy / 1e3:.0f} ms)")
            fw = [e for e in forwards if start <= e["ts"] <= end + 1e6]
            if fw:
                fw_busy = sum(e["dur"] for e in fw)
                line += (f"; the next forward: busy {fw_busy / 1e3:.0f} ms, done "
                         f"{(fw[-1]['ts'] + fw[-1]['dur'] - end) / 1e3:+.0f} ms after the last update")
            print(line)
            top = sorted(g, key=lambda e: -e["dur"])[:3]
            print("    longest:", ", ".join(f"{e['name']} {e['dur'] / 1e3:.1f} ms" for e in top))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
