#!/usr/bin/env bash
# Issue 20's benchmark on the GPU machine, as a user runs it: `lazytrain
# train` with one YAML config per executor, the Qwen2.5-3B shape
# (bench/models/qwen2.5-3b, random weights) at seq 1024, in one call:
#   resident   uncapped, batch 8 (the reference)
#   resident8bit  resident, batch 8, adamw8bit (the 8-bit update on the device)
#   auto8bit   the same with exec.mode auto (a predicted step; bench/auto_7b.sh
#              runs it with LT_BENCH_7B=auto8bit, measuring the profile first)
#   resident_mb2  the same in micro-batches of 2 (the offload runs' micro-batch)
#   offload    synchronous ZeRO-Offload, batch 8 in micro-batches of 2
#   offloaddisk  offload with exec.state_placement: disk (issue 26: the same
#              losses as offload, the masters and states read and written per stage)
#   zenflow    topk 0.1, update_interval 4, overlap, batch 8 in micro-batches of 2
#   streaming  exec.mode auto at exec.device_memory_gb 24, batch 64 (the planner)
#   streaming2 streaming again: after streaming in the same call, it plans with
#              the CPU update rate the first run measured (cpu_adam_in_run_scale)
#   stream20   streaming at exec.device_memory_gb 20
#   streamapart  streaming with exec.fused_tail: off (the last block and the head apart)
#   stream40, stream40apart  streaming and streamapart at exec.device_memory_gb 40
#   stream40allgpu  every boundary on the device as all_gpu, under exec.mode auto
#              before it was planned (exec.schedule every_k, keep_every 1: the
#              stages on the device in the room it leaves, no tail)
#   RUN        a schedule in bench/schedules/RUN.json, at exec.device_memory_gb 24
#   streaming32  the same in chunks of 32 (exec.micro_batch 32)
#   streaming8   the same in chunks of 8 (exec.micro_batch 8)
#   streamnone   the same with exec.stages_on_device none (every stage streams)
#   zenflow15, resident15  the Qwen2.5-1.5B shape (DeepSpeed ZenFlow's peer size)
#   auto7b     the Qwen2.5-7B shape, adamw8bit, exec.mode auto on the whole GPU, batch 8
#   stream7b24 the same at exec.device_memory_gb 24, batch 64 (issue 27's third run)
#   stream7b24prev  stream7b24 with train.clip_with_previous_norm: true (the
#              updates during the backward, Note [Updates during the backward])
#   streamprev streaming with train.clip_with_previous_norm: true (timed from
#              step 3: see skip_of)
# Each run is stopped (SIGKILL) once metrics.jsonl has its steps, before the
# final save. Prints, per run, tokens over wall time across the steps after
# the first (ZenFlow: after its first window), the median step, the GPU peak
# and the PCIe bytes per step.
# Needs build-gpu/lazytrain. Usage: bench/offload_3b.sh OUT_DIR [runs...]
set -uo pipefail
out=${1:?usage: bench/offload_3b.sh OUT_DIR [runs...]}
shift
runs=${*:-resident offload zenflow streaming}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
[ -d .devdeps ] && export LD_LIBRARY_PATH=$PWD/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=${LT_BENCH_BIN:-build-gpu/lazytrain}
python3 - "$out/data.jsonl" <<'PY'
import json, random, sys
random.seed(0)
with open(sys.argv[1], "w") as f:
    for _ in range(64 * 12):
        ids = [random.randrange(151936) for _ in range(1024)]
        f.write(json.dumps({"input_ids": ids, "labels": ids}) + "\n")
PY
config() {  # name batch grad_accum exec-lines [model] [optimizer]
  cat > "$out/$1.yaml" <<YAML
model:
  path: $root/bench/models/${5:-qwen2.5-3b}
  init: random
data:
  path: $out/data.jsonl
  format: tokens
train:
  steps: 1000
  batch_size: $2
  grad_accum: $3
  seq_len: 1024
  save_every: 0
optim:
  name: ${6:-adamw}
  lr: 1.0e-5
exec:
$4
out:
  dir: $out/$1
YAML
}
config resident 8 1 "  mode: resident"
config resident8bit 8 1 "  mode: resident" qwen2.5-3b adamw8bit
config auto8bit 8 1 "  mode: auto" qwen2.5-3b adamw8bit
config resident_mb2 8 4 "  mode: resident"
config offload 8 4 "  mode: offload"
config offloaddisk 8 4 "  mode: offload
  state_placement: disk"
config zenflow 8 4 "  mode: zenflow
  zenflow:
    topk_ratio: 0.1
    update_interval: 4
    overlap_step: true"
config streaming 64 1 "  mode: auto
  device_memory_gb: 24"
config streaming2 64 1 "  mode: auto
  device_memory_gb: 24"
config stream20 64 1 "  mode: auto
  device_memory_gb: 20"
config streamapart 64 1 "  mode: auto
  device_memory_gb: 24
  fused_tail: off"
config stream40 64 1 "  mode: auto
  device_memory_gb: 40"
config stream40apart 64 1 "  mode: auto
  device_memory_gb: 40
  fused_tail: off"
config stream40allgpu 64 1 "  mode: auto
  device_memory_gb: 40
  schedule: every_k
  keep_every: 1"
config streaming32 64 1 "  mode: auto
  device_memory_gb: 24
  micro_batch: 32"
config streaming8 64 1 "  mode: auto
  device_memory_gb: 24
  micro_batch: 8"
config streamnone 64 1 "  mode: auto
  device_memory_gb: 24
  stages_on_device: none"
config auto7b 8 1 "  mode: auto" qwen2.5-7b adamw8bit
config stream7b24 64 1 "  mode: auto
  device_memory_gb: 24" qwen2.5-7b adamw8bit
config stream7b24prev 64 1 "  mode: auto
  device_memory_gb: 24" qwen2.5-7b adamw8bit
config streamprev 64 1 "  mode: auto
  device_memory_gb: 24"
for run in stream7b24prev streamprev; do
  sed -i 's/^  save_every: 0$/&\n  clip_with_previous_norm: true/' "$out/$run.yaml"
done
config zenflow7b 8 1 "  mode: zenflow
  zenflow:
    topk_ratio: 0.1
    update_interval: 4
    overlap_step: true" qwen2.5-7b adamw8bit
config zenflow15 8 4 "  mode: zenflow
  zenflow:
    topk_ratio: 0.1
    update_interval: 4
    overlap_step: true" qwen2.5-1.5b
config resident15 8 1 "  mode: resident" qwen2.5-1.5b
# A run named after a schedule in bench/schedules/ (RUN.json, the 3B's):
# streaming at exec.device_memory_gb 24 with that schedule as written.
for run in $runs; do
  [ -f "bench/schedules/$run.json" ] || continue
  config "$run" 64 1 "  mode: streaming
  device_memory_gb: 24
  schedule: $root/bench/schedules/$run.json"
done
# LT_BENCH_CONFIGS_ONLY=1: write the data and the configs, run nothing.
[ -n "${LT_BENCH_CONFIGS_ONLY:-}" ] && exit 0
steps_of() { case $1 in zenflow|zenflow15|auto7b) echo 13 ;; resident) echo 9 ;; streamprev) echo 7 ;; *) echo 5 ;; esac; }
# streamprev: step 1 has no previous norm (exact clipping), and step 2's
# forward waits for step 1's updates; from step 3 on every step updates
# during its backward, as the rest of a run does.
skip_of() { case $1 in streamprev) echo 2 ;; *) echo 1 ;; esac; }
for run in $runs; do
  steps=$(steps_of "$run")
  echo "== $run ($steps steps)"
  "$bin" train "$out/$run.yaml" --no-sample > "$out/$run.log" 2>&1 &
  pid=$!
  # LT_BENCH_THREAD_CPU=1: each thread's CPU use through the run (bench/thread_cpu.py).
  [ -n "${LT_BENCH_THREAD_CPU:-}" ] && python3 bench/thread_cpu.py $pid 600 0.25 > "$out/$run.threads.tsv" &
  for _ in $(seq 1 400); do
    n=$(wc -l 2>/dev/null < "$out/$run/metrics.jsonl" || echo 0)
    [ "$n" -ge "$steps" ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 1
  done
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  grep -E "^(executor|schedule|device|plan:|weights|hardware|exec.mode auto|exec.schedule auto|  stages kept|  predicted step|  (resident|zenflow|offload|streaming) )" "$out/$run.log" | head -20
  # The profiles the planner priced with (the optimizer's rates among them).
  mkdir -p "$out/hardware-cache"
  cp "${XDG_CACHE_HOME:-$HOME/.cache}"/lazytrain/*.yaml "$out/hardware-cache/" 2>/dev/null
  python3 - "$out/$run/metrics.jsonl" "$run" "$(skip_of "$run")" <<'PY' | tee -a "$out/summary.txt"
import json, statistics, sys
path, run, skip = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    rows = [json.loads(l) for l in open(path)]
except FileNotFoundError:
    print(f"{run}: no metrics"); sys.exit()
for r in rows:
    print(f"  step {r['step']}: loss {r['loss']:.4f} step_s {r['step_s']:.3f} compute {r['compute_s']:.3f} "
          f"h2d {r['exposed_h2d_s']:.3f} d2h {r['exposed_d2h_s']:.3f} opt {r['optimizer_s']:.3f} "
          f"gpu peak {r['peak_bytes'].get('gpu', 0)/1e9:.2f} GB pcie {(r.get('h2d_bytes', 0) + r.get('d2h_bytes', 0))/1e9:.2f} GB"
          f" cpu update {r.get('cpu_update_gparams_per_s', 0):.2f} G/s")
timed = rows[skip:]
if not timed:
    print(f"{run}: too few steps"); sys.exit()
tokens = sum(r["tokens"] for r in timed); wall = sum(r["step_s"] for r in timed)
pcie = sum(r.get("h2d_bytes", 0) + r.get("d2h_bytes", 0) for r in timed) / len(timed)
stall = sum(r["exposed_h2d_s"] + r["exposed_d2h_s"] + r["optimizer_s"] for r in timed) / len(timed)
peak = max(r["peak_bytes"].get("gpu", 0) for r in rows)
med = statistics.median(r['step_s'] for r in timed)
pred = timed[0].get("predicted_step_s", 0)
print(f"{run}: steps {skip+1}-{len(rows)}: {tokens / wall:.0f} tokens/s over their wall time, median step "
      f"{med:.3f} s ({f'predicted {pred:.3f} s, {(pred / med - 1) * 100:+.1f}%' if pred > 0 else 'no prediction'}), gpu peak {peak/1e9:.2f} GB, "
      f"PCIe {pcie/1e9:.2f} GB/step, stall {stall:.3f} s/step")
PY
done
