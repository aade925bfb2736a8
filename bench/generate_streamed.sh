#!/usr/bin/env bash
# Generation of models larger than the GPU they run on (issue 23; Note
# [Streamed generation] in src/exec/streamed_weights.h), on the H200
# machine: `lazytrain generate --device-memory-gb X` keeps the blocks that do
# not fit X in pinned host memory and copies them in, two slots, for every
# forward. A decode step then moves every streamed byte once, so it takes at
# least streamed bytes / the host-to-device bandwidth (53.3 GB/s pinned on
# the H200), whatever the batch; the run's first line prints that bound.
#
# Shapes: Qwen2.5-7B (bench/models/qwen2.5-7b, 15.2 GB of bf16 weights) and,
# with LT_BENCH_14B=1 and ~100 GB of host memory available, Qwen2.5-14B
# (29.5 GB). Random bf16 weights made by transformers on the GPU and saved
# under SCRATCH (default /dev/shm: no disk writes), EOS removed so every row
# makes all its tokens. Prompts of 512 random ids, 256 new tokens (NEW),
# greedy, batch 1 and 64. The caps: 7B batch 1 at 8 GB, 7B batch 64 at
# 16 GB (its KV cache, 2.8 GB, and prefill activations, ~6.7 GB, must fit
# too), 14B at 24 GB (batch 64: its KV cache is 9.7 GB); each cap leaves
# most blocks streaming. Tokens/s count the prompt's forward too.
#
# Device time: ~3 min for the 7B (model made and saved ~40 s, each run
# loads ~15 s and decodes 256 steps of ~0.15-0.19 s); the 14B adds ~3 min
# (NEW_14B=64 new tokens by default to keep it short).
#
#   bench/generate_streamed.sh OUT_DIR
#
# Writes OUT_DIR/generate_streamed.jsonl (one object per run: shape, batch,
# cap, the device line, new tokens, seconds, tokens/s, the bound) and each
# run's stderr, and prints a table.
set -uo pipefail
out=${1:?usage: bench/generate_streamed.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
bin=${LT_BENCH_BIN:-build-gpu/lazytrain}
scratch=${SCRATCH:-/dev/shm/lt-generate-streamed}
new=${NEW:-256}
new_14b=${NEW_14B:-64}
prompt=512
mkdir -p "$scratch"
results=$out/generate_streamed.jsonl
: > "$results"

# make_model SHAPE FOLDER: random bf16 weights of bench/models/SHAPE.
make_model() {
  python3 - "$root/bench/models/$1/config.json" "$2" <<'PY'
import json, os, sys
import torch, transformers
with open(sys.argv[1]) as f:
    cfg = json.load(f)
cfg["eos_token_id"] = None  # every row runs to its last token
cfg.pop("torch_dtype", None)
torch.manual_seed(0)
with torch.device("cuda"):
    model = transformers.AutoModelForCausalLM.from_config(
        transformers.Qwen2Config(**cfg), torch_dtype=torch.bfloat16)
model.generation_config.eos_token_id = None
model.save_pretrained(sys.argv[2], safe_serialization=True, max_shard_size="4GB")
gen = os.path.join(sys.argv[2], "generation_config.json")
if os.path.exists(gen):
    os.remove(gen)
PY
}

# prompts BATCH FILE: BATCH rows of $prompt random ids below 151,000.
prompts() {
  python3 - "$1" "$2" "$prompt" <<'PY'
import json, random, sys
random.seed(int(sys.argv[1]))
with open(sys.argv[2], "w") as f:
    for _ in range(int(sys.argv[1])):
        f.write(json.dumps({"input_ids": [random.randrange(151000) for _ in range(int(sys.argv[3]))]}) + "\n")
PY
}

# run SHAPE FOLDER BATCH CAP_GB NEW_TOKENS
run() {
  local shape=$1 folder=$2 batch=$3 cap=$4 tokens=$5
  local rows=$scratch/prompts_$batch.jsonl log=$out/${shape}_b${batch}.stderr
  prompts "$batch" "$rows"
  "$bin" generate --model "$folder" --data "$rows" --max-new-tokens "$tokens" \
    --batch-size "$batch" --device cuda --device-memory-gb "$cap" > /dev/null 2> "$log"
  local rc=$?
  python3 - "$log" "$shape" "$batch" "$cap" "$rc" "$results" <<'PY'
import json, re, sys
log, shape, batch, cap, rc, results = sys.argv[1:]
text = open(log).read()
device = re.search(r"^generate: .*?, on (.*)$", text, re.M)
made = re.search(r"(\d+) new tokens in ([0-9.]+) s \(([0-9.]+) tokens/s(?:.*?([0-9.]+) s waiting)?", text)
bound = re.search(r"takes at least ([0-9.]+) s", text)
r = {"shape": shape, "batch": int(batch), "device_memory_gb": float(cap), "rc": int(rc),
     "device": device.group(1) if device else None}
if made:
    r.update(tokens=int(made.group(1)), seconds=float(made.group(2)),
             tokens_per_s=float(made.group(3)),
             upload_wait_s=float(made.group(4)) if made.group(4) else None)
if bound:
    step = float(bound.group(1))
    r.update(bound_step_s=step, bound_tokens_per_s=int(batch) / step)
    if made:
        r["measured_step_s"] = int(batch) * r["seconds"] / r["tokens"]
if int(rc) != 0:
    r["error"] = text[-1500:]
open(results, "a").write(json.dumps(r) + "\n")
print(json.dumps(r), flush=True)
PY
}

# shape_runs SHAPE NEW_TOKENS CAP_B1 CAP_B64: make the model, run both
# batches, and free the scratch.
shape_runs() {
  local folder=$scratch/$1
  echo "== making the $1 shape (random bf16) in $folder"
  make_model "$1" "$folder" || return 1
  run "$1" "$folder" 1 "$3" "$2"
  run "$1" "$folder" 64 "$4" "$2"
  rm -rf "$folder"
}

shape_runs qwen2.5-7b "$new" 8 16
if [ "${LT_BENCH_14B:-0}" = 1 ]; then
  avail=$(awk '/MemAvailable/ {print int($2 / 1e6)}' /proc/meminfo)
  if [ "$avail" -lt 100 ]; then
    echo "== skipping the 14B: $avail GB of host memory available, ~100 needed (30 GB in $scratch, 30 GB read, up to 30 GB pinned)"
  else
    shape_runs qwen2.5-14b "$new_14b" 24 24
  fi
fi

python3 - "$results" <<'PY'
import json, sys
print(f"{'shape':<12}{'batch':>6}{'cap GB':>8}{'tokens/s':>10}{'step s':>9}{'bound s':>9}{'waited s':>9}")
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["rc"] != 0:
        print(f"{r['shape']:<12}{r['batch']:>6}{r['device_memory_gb']:>8}  failed: {r.get('error', '')[-200:]}")
        continue
    print(f"{r['shape']:<12}{r['batch']:>6}{r['device_memory_gb']:>8}{r.get('tokens_per_s', 0):>10.1f}"
          f"{r.get('measured_step_s', 0):>9.3f}{r.get('bound_step_s', 0):>9.3f}{r.get('upload_wait_s') or 0:>9.2f}")
    print(f"    {r['device']}")
PY
