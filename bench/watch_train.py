"""Runs `lazytrain train CONFIG --no-sample` until its metrics.jsonl has
STEPS lines (or TIMEOUT seconds pass), then kills it (before the final
save), prints each step and one RESULT line of JSON: the steps after the
second timed (the first two warm up: kernels load, programs trace), with
tokens/s over the wall time between their metrics lines (stamped as each
appears, every 20 ms, so everything between steps counts) and the median
step. For the bench scripts (bench/gpt2_124m.sh, bench/compile_e2e.sh).

Usage: watch_train.py BIN CONFIG RUN_DIR LOG STEPS TIMEOUT [FIELDS_JSON]
BIN: the binary, or a command line before `train` ("lazytrain launch --nproc
2"); the whole process group is killed, every rank included.
FIELDS_JSON: fields put first in the RESULT (which system or run it is).
Exits 1 when fewer than 4 steps ran."""
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time

binary, config, run_dir, log_path = sys.argv[1:5]
want, timeout = int(sys.argv[5]), float(sys.argv[6])
fields = json.loads(sys.argv[7]) if len(sys.argv) > 7 else {}
metrics = os.path.join(run_dir, "metrics.jsonl")
with open(log_path, "w") as log:
    proc = subprocess.Popen(shlex.split(binary) + ["train", config, "--no-sample"], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    stamps, deadline = [], time.time() + timeout
    while len(stamps) < want and proc.poll() is None and time.time() < deadline:
        try:
            with open(metrics) as f:
                n = sum(1 for _ in f)
        except FileNotFoundError:
            n = 0
        stamps += [time.perf_counter()] * (n - len(stamps))
        time.sleep(0.02)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
rows = []
if os.path.exists(metrics):
    with open(metrics) as f:
        rows = [json.loads(line) for line in f]
for r in rows:
    print(f"  step {r['step']}: loss {r['loss']:.4f} step_s {r['step_s']:.4f} "
          f"compute {r['compute_s']:.4f} opt {r['optimizer_s']:.4f}")
if len(rows) < 4 or len(stamps) < 4:
    print(f"{json.dumps(fields)}: too few steps (see {log_path})")
    sys.exit(1)
# Steps 3.. are timed: the wall from step 2's line to the last line.
timed = rows[2:len(stamps)]
wall = stamps[len(stamps) - 1] - stamps[1]
tokens = sum(r["tokens"] for r in timed)
med = statistics.median(r["step_s"] for r in timed)
peak = max(r["peak_bytes"].get("gpu", 0) for r in rows)
print("RESULT " + json.dumps({**fields, "steps": len(timed), "median_step_s": round(med, 4),
                              "tokens_per_s": round(rows[2]["tokens"] / med, 1),
                              "tokens_per_s_wall": round(tokens / wall, 1),
                              "first_step_s": round(rows[0]["step_s"], 3),
                              "second_step_s": round(rows[1]["step_s"], 3),
                              "peak_gb": round(peak / 1e9, 2)}))
