#!/usr/bin/env bash
# Issue 20's 7B goal on the GPU machine: the Qwen2.5-7B shape (random
# weights, adamw8bit, seq 1024), `exec.mode: auto` on the whole GPU. Times
# each phase of a user's run: `lazytrain profile --model` (the measured
# stage times the prediction needs), `lazytrain plan` with and without that
# profile, then `lazytrain train` with every log line time-stamped, stopped
# after STEPS steps. Usage: bench/auto_7b.sh OUT_DIR [batch] [steps]
set -uo pipefail
out=${1:?usage: bench/auto_7b.sh OUT_DIR [batch] [steps]}
batch=${2:-8}
steps=${3:-8}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
bin=${LT_BENCH_BIN:-build-gpu/lazytrain}
LT_BENCH_CONFIGS_ONLY=1 bench/offload_3b.sh "$out" || exit 1
cfg=$out/auto7b.yaml
sed -i "s/^  batch_size: .*/  batch_size: $batch/" "$cfg"
stamp() { while IFS= read -r line; do printf '%(%T)T %s\n' -1 "$line"; done; }
echo "== profile"
/usr/bin/time -f "profile wall %e s, max RSS %M KB" "$bin" profile --model bench/models/qwen2.5-7b \
  --out "$out/hw7b.yaml" 2>&1 | tail -25
echo "== plan (no profile)"
/usr/bin/time -f "plan wall %e s" "$bin" plan --config "$cfg" 2>&1 | head -12
echo "== plan (measured profile)"
"$bin" plan --config "$cfg" --set exec.hardware="$out/hw7b.yaml" 2>&1 | head -12
echo "== train"
"$bin" train "$cfg" --no-sample --set exec.hardware="$out/hw7b.yaml" 2>&1 | stamp > "$out/train.log" &
pid=$!
for _ in $(seq 1 300); do
  n=$(wc -l < "$out/auto7b/metrics.jsonl" 2>/dev/null || echo 0)
  [ "$n" -ge "$steps" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 1
done
pkill -9 -f "lazytrain train $cfg"; wait $pid 2>/dev/null
head -30 "$out/train.log"
python3 - "$out/auto7b/metrics.jsonl" <<'PY'
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
