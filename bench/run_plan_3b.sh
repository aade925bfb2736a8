#!/usr/bin/env bash
# The run plan on the GPU machine, as a user runs it: `lazytrain plan
# --config` and then `lazytrain train` of one YAML config, the Qwen2.5-3B
# shape (bench/models/qwen2.5-3b, random weights) at seq 1024, batch 64,
# exec.mode auto with exec.device_memory_gb 24 (a 24 GB card): auto picks
# streaming and the planner its schedule. The run is stopped (SIGKILL) once
# metrics.jsonl has LT_BENCH_STEPS lines, before the final save (a 3B f32
# checkpoint with its states is ~37 GB). Prints the plan, the steps and
# tokens over wall time across the steps after the first.
# Needs build-gpu/lazytrain. Usage: bench/run_plan_3b.sh OUT_DIR
set -uo pipefail
out=${1:?usage: bench/run_plan_3b.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
[ -d .devdeps ] && export LD_LIBRARY_PATH=$PWD/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=${LT_BENCH_BIN:-build-gpu/lazytrain}
steps=${LT_BENCH_STEPS:-6}
python3 - "$out/data.jsonl" <<'PY'
import json, random, sys
random.seed(0)
with open(sys.argv[1], "w") as f:
    for _ in range(64 * 12):
        ids = [random.randrange(151936) for _ in range(1024)]
        f.write(json.dumps({"input_ids": ids, "labels": ids}) + "\n")
PY
cat > "$out/run.yaml" <<YAML
model:
  path: $root/bench/models/qwen2.5-3b
  init: random
data:
  path: $out/data.jsonl
  format: tokens
train:
  steps: 1000
  batch_size: 64
  seq_len: 1024
  save_every: 0
optim:
  name: adamw
  lr: 1.0e-5
exec:
  mode: auto
  device_memory_gb: 24
out:
  dir: $out/run
YAML
echo "== lazytrain plan --config"
"$bin" plan --config "$out/run.yaml" 2>&1 | tee "$out/plan.log" | head -20
echo "== lazytrain train"
"$bin" train "$out/run.yaml" --no-sample > "$out/train.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  n=$(wc -l 2>/dev/null < "$out/run/metrics.jsonl" || echo 0)
  [ "$n" -ge "$steps" ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 1
done
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
grep -E "^(executor|schedule|device|exec\.|  predicted|weights)" "$out/train.log" | head
python3 - "$out/run/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    print(f"step {r['step']}: loss {r['loss']:.4f} step_s {r['step_s']:.3f} tokens/s {r['tokens_per_s']:.0f} "
          f"predicted {r.get('predicted_step_s', 0):.3f} gpu peak {r['peak_bytes'].get('gpu', 0)/1e9:.2f} GB")
timed = rows[1:]
tokens = sum(r["tokens"] for r in timed); wall = sum(r["step_s"] for r in timed)
print(f"steps 2-{len(rows)}: {tokens / wall:.0f} tokens/s over their wall time, median step "
      f"{statistics.median(r['step_s'] for r in timed):.3f} s")
PY
