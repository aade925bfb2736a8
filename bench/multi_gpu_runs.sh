#!/usr/bin/env bash
# Issue 22's runs on the two-GPU machine (nvidia-h200-x2: 2 H200s, 32 cores,
# 256 GB host), as a user runs them (`lazytrain train` / `lazytrain launch`
# with YAML configs, random weights, random tokens, seq 1024), each run
# stopped once it has its steps (bench/watch_train.py: tokens over the wall
# time of the steps after the second, and the median step):
#   plan      CPU only, no GPU: `lazytrain plan --gpus 1|2` for every run
#             below (memory per rank and node, the collectives, the
#             predicted step) against the H200 profiles in bench/profiles;
#   scaling   run 1: the Qwen2.5-3B shape, resident at 8 sequences a GPU
#             (1 GPU at batch 16 in micro-batches of 8, 2 GPUs at batch 16)
#             and streaming at exec.device_memory_gb 24 with the planned
#             schedule at 64 a GPU (1 GPU: 64, 2 GPUs: 128 with all-reduce
#             and with ZeRO-1; plus the 1-GPU run at 128 for the losses);
#             PyTorch on 1 GPU and DDP on 2 (tools/reference/
#             torch_baseline.py under torchrun) at 8 a GPU;
#             ZenFlow at exec.device_memory_gb 48, 8 a GPU, a CPU update
#             every 4 steps (1 GPU: 8, 2 GPUs: 16; plus 1 GPU at 16 in
#             micro-batches of 8);
#             then the speed-ups and the largest loss difference at the
#             same global batch;
#   zero      run 2: the Qwen2.5-7B shape, adamw8bit, streaming, 1 rank and
#             2 ranks with dist.zero 1 (dist.share_weights): the node's
#             host memory in use at its peak (MemTotal - MemAvailable,
#             sampled every 0.5 s, less before the run);
#   failures  run 3: the Qwen2.5-0.5B shape, resident, 2 ranks,
#             dist.timeout_s 60: rank 1 SIGKILLed after step 3 (the
#             launcher names it), rank 1 SIGSTOPped after step 3 (rank 0's
#             NCCL wait names it within the timeout), and GPU 1 filled by
#             another process before the start (rank 1 runs out of memory);
#             each prints the exit status, the seconds to exit and the
#             lines that name the rank;
#   big27b    run 4: a 27B-class model (hidden 5120, 64 layers, FFN 17408,
#             24/4 heads of 256, vocabulary 151936; Qwen3) on one GPU with
#             the 256 GB host: adamw8bit, streaming, exec.schedule auto,
#             state_placement auto (the disk under DISK_DIR), the
#             planner's batch (LT_BENCH_27B_BATCH, default 72 as the paper);
#             `lazytrain profile` of the disk first, the plan, then STEPS
#             steps against the prediction.
# NCCL_NVLS_ENABLE=0 is exported for every process (never NVLink multicast).
# Binaries: a packed build (bench/pack_gpu_build.sh build, carry
# ["build-carry"]; this script unpacks it when build-gpu/lazytrain is
# missing). The profile cache is OUT/cache (each shape measured once).
# Usage: bench/multi_gpu_runs.sh OUT_DIR [plan|scaling|zero|failures|big27b ...]
#        (default: scaling zero failures big27b)
# Env: LT_BENCH_BIN (build-gpu/lazytrain), LT_BENCH_STEPS (8),
#      LT_BENCH_DISK (/tmp/lt-states-27b), LT_BENCH_27B_BATCH (72).
set -uo pipefail
out=${1:?usage: bench/multi_gpu_runs.sh OUT_DIR [plan|scaling|zero|failures|big27b ...]}
shift
runs=${*:-scaling zero failures big27b}
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Everything printed goes to OUT/summary.txt as well: a device call returns
# only a few files and the last 12,000 characters of its output.
exec > >(tee -a "$out/summary.txt") 2>&1
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
export NCCL_NVLS_ENABLE=0 LT_CACHE_DIR=$out/cache
bin=${LT_BENCH_BIN:-build-gpu/lazytrain}
steps=${LT_BENCH_STEPS:-8}
disk=${LT_BENCH_DISK:-/tmp/lt-states-27b}
status=0
if [ "$runs" != plan ] && [ ! -x "$bin" ] && [ -f build-carry/bins.tar.xz ]; then
  bash bench/gpu.sh "$out" unpack > "$out/unpack.log" 2>&1 || { tail "$out/unpack.log"; exit 1; }
fi
[ -d build-carry/x/lib ] && export LD_LIBRARY_PATH=$root/build-carry/x/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ "$runs" = plan ] && [ ! -x "$bin" ] && bin=build/lazytrain

# The 27B-class config of issue 8 (bench/plan_27b.sh), Qwen3 with q/k norms.
mkdir -p "$out/qwen27b"
cat > "$out/qwen27b/config.json" <<'JSON'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120,
 "num_hidden_layers": 64, "intermediate_size": 17408, "num_attention_heads": 24,
 "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 151936,
 "tie_word_embeddings": false, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
 "rope_theta": 1000000.0, "hidden_act": "silu", "bos_token_id": 151643,
 "eos_token_id": 151645, "torch_dtype": "bfloat16"}
JSON
model_dir() { [ "$1" = qwen27b ] && echo "$out/qwen27b" || echo "$root/bench/models/$1"; }

# Random tokens, as many rows as the largest run reads (seed 0).
tokens() {  # FILE ROWS VOCAB
  [ -f "$1" ] && return
  python3 - "$@" <<'PY'
import json, random, sys
random.seed(0)
with open(sys.argv[1], "w") as f:
    for _ in range(int(sys.argv[2])):
        ids = [random.randrange(int(sys.argv[3])) for _ in range(1024)]
        f.write(json.dumps({"input_ids": ids, "labels": ids}) + "\n")
PY
}

config() {  # NAME MODEL BATCH OPTIM MODE [extra YAML lines for exec: and dist:]
  local name=$1 model=$2 batch=$3 optim=$4 mode=$5 extra=${6:-}
  cat > "$out/$name.yaml" <<YAML
model:
  path: $(model_dir "$model")
  init: random
data:
  path: $out/data.jsonl
  format: tokens
train:
  steps: 1000
  batch_size: $batch
  seq_len: 1024
  dtype: bf16
  grad_clip: 1.0
  save_every: 0
optim:
  name: $optim
  lr: 1.0e-5
exec:
  mode: $mode
$extra
out:
  dir: $out/$name
YAML
}

train() {  # NAME GPUS MODEL: one watched run; RESULT line into results.txt
  local name=$1 gpus=$2 model=$3 cmd=$bin
  [ "$gpus" -gt 1 ] && cmd="$bin launch --via fork --nproc $gpus"
  rm -rf "${out:?}/$name"
  echo "== $name ($gpus GPU$([ "$gpus" -gt 1 ] && echo s))"
  python3 bench/watch_train.py "$cmd" "$out/$name.yaml" "$out/$name" "$out/$name.log" \
    "$steps" 420 "{\"run\": \"$name\", \"gpus\": $gpus, \"model\": \"$model\"}" |
    tee -a "$out/results.txt" | grep -E "RESULT|too few" || status=1
  grep -E "schedule:|predict|rror" "$out/$name.log" | head -4
}

losses_agree() {  # A B: the largest |loss difference| over the steps both ran
  python3 - "$out/$1/metrics.jsonl" "$out/$2/metrics.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:3])
n = min(len(a), len(b))
d = max(abs(x - y) for x, y in zip(a[:n], b[:n])) if n else float("nan")
print(f"losses over {n} steps: largest difference {d:.2e} (bf16 tolerance ~1e-2)")
PY
}

plan_runs() {
  local hw3=bench/profiles/h200_qwen2.5-3b_seq1024.yaml hw7=bench/profiles/h200_qwen2.5-7b_seq1024.yaml
  for g in 1 2; do
    echo "== plan: 3B streaming at 64 a GPU (the measured 3B profile), $g GPU(s)"
    "$bin" plan --model bench/models/qwen2.5-3b --hardware "$hw3" --batch-size $((64 * g)) \
      --gpus "$g" --time-limit 20 2>&1 | grep -vE "^  (gpu|host|disk) "
    echo "== plan: 7B adamw8bit at 64 a GPU (the measured 7B profile), $g GPU(s)"
    "$bin" plan --model bench/models/qwen2.5-7b --hardware "$hw7" --optimizer adamw8bit \
      --batch-size $((64 * g)) --gpus "$g" --time-limit 20 2>&1 | grep -vE "^  (gpu|host|disk) "
  done
  echo "== plan: 27B-class, adamw8bit, batch ${LT_BENCH_27B_BATCH:-72}, one GPU of the x2 machine"
  echo "   (the H200 figures, the FLOP model, host_memory_gb 240 of its 256 GB)"
  big27b_config
  printf 'host_memory_gb: 240\ndisk_gb: 60\n' > "$out/x2_host.yaml"
  "$bin" plan --config "$out/big27b.yaml" --set train.device=cuda \
    --set exec.hardware="$out/x2_host.yaml" 2>&1 | grep -vE "^  (gpu|host|disk) " | cut -c1-240
}

big27b_config() {
  mkdir -p "$disk"
  tokens "$disk/data27b.jsonl" $((${LT_BENCH_27B_BATCH:-72} * 6)) 151936
  config big27b qwen27b "${LT_BENCH_27B_BATCH:-72}" adamw8bit streaming "  schedule: auto
  state_placement: auto
  disk_path: $disk"
  sed -i "s|path: $out/data.jsonl|path: $disk/data27b.jsonl|" "$out/big27b.yaml"
}

scaling() {
  tokens "$out/data.jsonl" $((128 * (steps + 2))) 151936
  config res1 qwen2.5-3b 16 adamw resident "  micro_batch: 8"
  config res2 qwen2.5-3b 16 adamw resident
  local cap="  schedule: auto
  device_memory_gb: 24"
  config stream1 qwen2.5-3b 64 adamw streaming "$cap"
  config stream2 qwen2.5-3b 128 adamw streaming "$cap"
  config stream1x128 qwen2.5-3b 128 adamw streaming "$cap"
  # With all-reduce each rank updates every master on half the cores:
  # `plan --gpus 2` prices 4.17 s a step; ZeRO-1 halves each rank's update
  # (3.28 s).
  config stream2z qwen2.5-3b 128 adamw streaming "$cap
dist:
  zero: 1"
  train res1 1 qwen2.5-3b
  train res2 2 qwen2.5-3b
  train stream1 1 qwen2.5-3b
  train stream2 2 qwen2.5-3b
  train stream2z 2 qwen2.5-3b
  train stream1x128 1 qwen2.5-3b
  # ZenFlow over ranks (all-reduce; Note [ZenFlow over ranks]) as the
  # qwen2.5-3b_48gb recipe runs it: 8 a GPU, a CPU update every 4 steps.
  local zen="  device_memory_gb: 48
  zenflow:
    update_interval: 4"
  config zen1 qwen2.5-3b 8 adamw zenflow "$zen"
  config zen2 qwen2.5-3b 16 adamw zenflow "$zen"
  config zen1x16 qwen2.5-3b 16 adamw zenflow "$zen
  micro_batch: 8"
  train zen1 1 qwen2.5-3b
  train zen2 2 qwen2.5-3b
  train zen1x16 1 qwen2.5-3b
  echo "== PyTorch, 1 GPU and DDP on 2, batch 8 a GPU"
  timeout 300 python3 tools/reference/torch_baseline.py bench/models/qwen2.5-3b/config.json \
    --batch 8 --steps 8 > "$out/torch1.log" 2>&1 || status=1
  timeout 300 torchrun --nproc-per-node 2 tools/reference/torch_baseline.py \
    bench/models/qwen2.5-3b/config.json --batch 8 --steps 8 > "$out/ddp2.log" 2>&1 || status=1
  grep -h RESULT "$out/torch1.log" "$out/ddp2.log" | sed 's/^RESULT //' | tee -a "$out/results.txt"
  echo "== resident, 1 vs 2 GPUs at batch 16:"; losses_agree res1 res2
  echo "== streaming, 1 vs 2 GPUs at batch 128:"; losses_agree stream1x128 stream2
  echo "== streaming with ZeRO-1, 1 vs 2 GPUs at batch 128:"; losses_agree stream1x128 stream2z
  echo "== ZenFlow, 1 vs 2 GPUs at batch 16:"; losses_agree zen1x16 zen2
  python3 - "$out/results.txt" <<'PY'
import json, sys
r = {}
for line in open(sys.argv[1]):
    line = line.removeprefix("RESULT ")
    if line.startswith("{"):
        j = json.loads(line)
        r[j.get("run") or f"{j['system']}{j.get('world', 1)}"] = j["tokens_per_s_wall"]
def ratio(a, b, goal):
    if a in r and b in r:
        print(f"{a} / {b}: {r[a] / r[b]:.3f} (goal >= {goal})")
ratio("res2", "res1", 1.9); ratio("stream2", "stream1", 1.9); ratio("stream2z", "stream1", 1.9)
ratio("zen2", "zen1", 1.9)
ratio("res2", "pytorch-ddp2", 1.2); ratio("res1", "pytorch1", 1.0)
PY
}

host_peak() {  # PID OUTFILE: the node's memory in use at its peak, less at the start
  local base peak=0 used
  base=$(awk '/MemTotal/{t=$2} /MemAvailable/{a=$2} END{print t-a}' /proc/meminfo)
  while kill -0 "$1" 2>/dev/null; do
    used=$(awk '/MemTotal/{t=$2} /MemAvailable/{a=$2} END{print t-a}' /proc/meminfo)
    [ "$used" -gt "$peak" ] && peak=$used
    sleep 0.5
  done
  echo "$(( (peak - base) / 1024 / 1024 ))" > "$2"
}

zero() {
  tokens "$out/data.jsonl" $((128 * (steps + 2))) 151936
  config zero1 qwen2.5-7b 64 adamw8bit streaming "  schedule: auto"
  config zero2 qwen2.5-7b 128 adamw8bit streaming "  schedule: auto
dist:
  zero: 1
  share_weights: true"
  for run in zero1:1 zero2:2; do
    local name=${run%:*} gpus=${run#*:}
    train "$name" "$gpus" qwen2.5-7b &
    local pid=$!
    host_peak $pid "$out/$name.host_gib" &
    wait $pid
    wait
    echo "$name: node host memory at its peak $(cat "$out/$name.host_gib") GiB over the start"
    grep -E "host|ZeRO|zero" "$out/$name.log" | head -4
  done
}

failure() {  # NAME WHAT: SIGKILL or SIGSTOP rank 1 after step 3, or oom
  local name=$1 what=$2 t0 pid
  config "$name" qwen2.5-0.5b 16 adamw resident "dist:
  timeout_s: 60"
  rm -rf "${out:?}/$name"
  local hog=
  if [ "$what" = oom ]; then
    python3 -c "import torch, time
x = torch.empty(int(torch.cuda.mem_get_info(1)[0] - (1 << 30)), dtype=torch.uint8, device='cuda:1')
time.sleep(600)" &
    hog=$!
    sleep 20
  fi
  t0=$(date +%s.%N)
  setsid "$bin" launch --via fork --nproc 2 train "$out/$name.yaml" --no-sample > "$out/$name.log" 2>&1 &
  pid=$!
  if [ "$what" != oom ]; then
    for _ in $(seq 1 300); do
      [ "$(wc -l 2>/dev/null < "$out/$name/metrics.jsonl" || echo 0)" -ge 3 ] && break
      sleep 0.5
    done
    # Rank 1: the launcher's child whose environment says RANK=1.
    local victim
    for c in $(pgrep -P $pid); do
      tr '\0' '\n' < /proc/$c/environ 2>/dev/null | grep -qx RANK=1 && victim=$c
    done
    t0=$(date +%s.%N)
    kill -"$what" "${victim:?rank 1 not found}"
  fi
  timeout 400 tail --pid=$pid -f /dev/null
  wait $pid; local rc=$?
  echo "== $name: exit $rc, $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$t0" "$(date +%s.%N)") s after the $what"
  grep -iE "rank 1|rank1|timed out|out of memory" "$out/$name.log" | head -4
  pkill -9 -f "$out/$name.yaml"
  [ -n "$hog" ] && kill "$hog"
  wait 2>/dev/null
}

failures() {
  tokens "$out/data.jsonl" $((128 * (steps + 2))) 151936
  failure fail_kill KILL
  failure fail_hang STOP
  failure fail_oom oom
}

big27b() {
  big27b_config
  echo "== profile (disk under $disk)"
  "$bin" profile --disk-path "$disk" --disk-mb 2048 --out "$out/hw27b.yaml" > "$out/profile27b.log" 2>&1
  grep -E "disk_(read|write)_gbps|host_memory_gb" "$out/hw27b.yaml"
  "$bin" plan --config "$out/big27b.yaml" > "$out/plan27b.txt" 2>&1
  grep -E "stages on disk|predicted|schedule:|host |rror" "$out/plan27b.txt" | head -12
  local keep=$steps
  steps=4
  train big27b 1 qwen27b
  steps=$keep
  python3 - "$out/big27b/metrics.jsonl" <<'PY'
import json, statistics, sys
try:
    rows = [json.loads(l) for l in open(sys.argv[1])][1:]
except FileNotFoundError:
    sys.exit(print("no metrics"))
if rows:
    med = statistics.median(r["step_s"] for r in rows)
    pred = rows[0].get("predicted_step_s", 0)
    print(f"27B: median step {med:.2f} s, predicted {pred:.2f} s ({(pred / med - 1) * 100:+.1f}%), "
          f"{rows[0]['tokens'] / med:.0f} tokens/s (goal >= 2722, 2x the paper's 1,361)")
PY
}

for run in $runs; do
  case $run in
    plan) plan_runs ;;
    scaling|zero|failures|big27b) $run ;;
    *) echo "unknown run $run"; status=1 ;;
  esac
done
exit $status
