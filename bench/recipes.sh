#!/usr/bin/env bash
# Measures each recipe (recipes/*.yaml) on the GPU machine: the recipe as it
# is, on its model's shape (the "# shape:" folder: config.json, random
# weights) and random token ids packed to seq_len, for LT_RECIPE_STEPS steps
# (default 12); the run is then killed (no final save: a 7B f32 checkpoint
# is 30 GB of disk). Prints one JSON line per recipe: the median tokens/s
# after the first step, the largest GPU and host peak metrics.jsonl
# reports, and the process's peak resident memory (VmHWM).
# Needs build-gpu (bench/gpu.sh build). Usage: bench/recipes.sh OUT_DIR [recipe.yaml ...]
set -uo pipefail
out=${1:?usage: bench/recipes.sh OUT_DIR [recipe.yaml ...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
recipes=${*:-$(ls recipes/*.yaml)}
mkdir -p "$out"
if [ -d .devdeps ]; then
  export LD_LIBRARY_PATH=$PWD/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
bin=${LT_BIN:-./build-gpu/lazytrain}
steps=${LT_RECIPE_STEPS:-12}
tokens=/tmp/recipe_tokens.jsonl
# 4,000 rows of 1,024 random ids below Qwen2.5's vocabulary (151,936).
python3 -c "
import json, random
random.seed(0)
with open('$tokens', 'w') as f:
    for _ in range(4000):
        f.write(json.dumps({'input_ids': [random.randrange(151936) for _ in range(1024)]}) + '\n')
"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1
for recipe in $recipes; do
  name=$(basename "$recipe" .yaml)
  shape=$(sed -n 's/^# shape: //p' "$recipe")
  dir=/tmp/recipe-$name
  rm -rf "$dir"
  "$bin" train "$recipe" --no-sample --set model.path="$shape" --set data.path="$tokens" \
    --set data.format=tokens --set data.eval_split=0 --set train.eval_every=0 \
    --set train.steps=1000 --set out.dir="$dir" > "$out/$name.log" 2>&1 &
  pid=$!
  hwm=0
  start=$(date +%s)
  while kill -0 "$pid" 2>/dev/null; do
    h=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    [ -n "$h" ] && hwm=$h
    n=$(grep -c . "$dir/metrics.jsonl" 2>/dev/null)
    if [ "${n:-0}" -ge "$steps" ] || [ $(($(date +%s) - start)) -gt "${LT_RECIPE_TIMEOUT_S:-300}" ]; then
      kill -9 "$pid"
      break
    fi
    sleep 1
  done
  wait "$pid" 2>/dev/null
  python3 - "$name" "$dir/metrics.jsonl" "$hwm" "$out/gpu.txt" <<'PY'
import json, statistics, sys
name, path, hwm_kb, gpu = sys.argv[1], sys.argv[2], int(sys.argv[3]), open(sys.argv[4]).read().strip()
try:
    lines = [json.loads(l) for l in open(path) if l.strip()]
except OSError:
    lines = []
if len(lines) < 3:
    print(json.dumps({"recipe": name, "error": "fewer than 3 steps; see the log"}))
    sys.exit(0)
after_first = lines[1:]
peaks = {}
for l in lines:
    for space, b in l.get("peak_bytes", {}).items():
        peaks[space] = max(peaks.get(space, 0), b)
print(json.dumps({
    "recipe": name, "steps": len(lines),
    "tokens_per_s": round(statistics.median(l["tokens_per_s"] for l in after_first)),
    "tokens_per_s_wall": round(sum(l["tokens"] for l in after_first) / sum(l["step_s"] for l in after_first)),
    "executor": lines[-1].get("executor", "?"),
    "step_s": round(statistics.median(l["step_s"] for l in after_first), 3),
    "peak_gb": {k: round(v / 1e9, 2) for k, v in peaks.items()},
    "vm_hwm_gb": round(hwm_kb * 1024 / 1e9, 1), "gpu": gpu}))
PY
done
