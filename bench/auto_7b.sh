#!/usr/bin/env bash
# Issue 20's 7B goal on the GPU machine: the Qwen2.5-7B shape (random
# weights, adamw8bit, seq 1024), `exec.mode: auto` on the whole GPU, as a
# user's first run: `lazytrain train` with every log line time-stamped
# (the profile it measures, the executor table, the choice), stopped after
# STEPS steps. Usage: bench/auto_7b.sh OUT_DIR [batch] [steps] [grad_accum]
# Env: LT_BENCH_7B=zenflow7b runs the same with exec.mode zenflow (topk 0.1,
#      update_interval 4), to check auto's choice against it.
set -uo pipefail
out=${1:?usage: bench/auto_7b.sh OUT_DIR [batch] [steps]}
batch=${2:-8}
steps=${3:-8}
accum=${4:-1}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
bin=${LT_BENCH_BIN:-build-gpu/lazytrain}
LT_BENCH_CONFIGS_ONLY=1 bench/offload_3b.sh "$out" || exit 1
name=${LT_BENCH_7B:-auto7b}
cfg=$out/$name.yaml
sed -i -e "s/^  batch_size: .*/  batch_size: $batch/" -e "s/^  grad_accum: .*/  grad_accum: $accum/" "$cfg"
stamp() { while IFS= read -r line; do printf '%(%T)T %s\n' -1 "$line"; done; }
# No exec.hardware: the run measures its profile once (Note [Profile by
# default]) into LT_CACHE_DIR, as a user's first run does.
export LT_CACHE_DIR=$out/cache
echo "== train"
"$bin" train "$cfg" --no-sample 2>&1 | stamp > "$out/train.log" &
pid=$!
for _ in $(seq 1 300); do
  n=$(wc -l 2>/dev/null < "$out/$name/metrics.jsonl" || echo 0)
  [ "$n" -ge "$steps" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 1
done
pkill -9 -f "lazytrain train $cfg"; wait $pid 2>/dev/null
grep -E "hardware|device:|executor|exec.mode|  (resident|zenflow|offload|streaming) |schedule:|predict|weights:|plan:|rror|step 1" "$out/train.log" | head -40
python3 - "$out/$name/metrics.jsonl" <<'PY'
import json, statistics, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1])]
except FileNotFoundError:
    print("no metrics"); sys.exit()
for r in rows:
    print(f"step {r['step']}: step_s {r['step_s']:.3f} compute {r['compute_s']:.3f} opt {r['optimizer_s']:.3f} "
          f"gpu peak {r['peak_bytes'].get('gpu', 0)/1e9:.2f} GB")
t = rows[1:]
if t:
    print(f"steps 2-{len(rows)}: {sum(r['tokens'] for r in t)/sum(r['step_s'] for r in t):.0f} tokens/s "
          f"over wall, median step {statistics.median(r['step_s'] for r in t):.3f} s")
PY
