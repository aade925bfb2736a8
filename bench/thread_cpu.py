#!/usr/bin/env python3
"""CPU time per thread of a running process, sampled every PERIOD seconds:
which threads are busy while the streaming executor's CPU update runs
(issue 27: does anything spin beside the optimizer's thread pool?).

    bench/thread_cpu.py PID SECONDS [PERIOD] > out.tsv

Prints one row per sample and thread that used any CPU: time since start,
thread id, thread name, and the share of one core it used over the period.
"""
import os
import sys
import time


def sample(pid):
    ticks = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        ticks[tid] = (name, int(fields[11]) + int(fields[12]))  # utime + stime
    return ticks


def main():
    pid, seconds = int(sys.argv[1]), float(sys.argv[2])
    period = float(sys.argv[3]) if len(sys.argv) > 3 else 0.5
    hz = os.sysconf("SC_CLK_TCK")
    start = time.time()
    before = sample(pid)
    print("t_s\ttid\tname\tcores")
    while time.time() - start < seconds and os.path.exists(f"/proc/{pid}"):
        time.sleep(period)
        now = sample(pid)
        t = time.time() - start
        for tid, (name, used) in now.items():
            delta = used - before.get(tid, (name, used))[1]
            if delta > 0:
                print(f"{t:.2f}\t{tid}\t{name}\t{delta / hz / period:.2f}")
        sys.stdout.flush()
        before = now


if __name__ == "__main__":
    main()
