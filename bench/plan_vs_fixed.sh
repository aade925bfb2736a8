#!/usr/bin/env bash
# Planned schedule vs the fixed "every 4th boundary on the GPU" policy at
# equal GPU memory (issue 8's benchmark), in one call, for the 3B- and
# 7B-shaped models (bench/models/qwen2.5-3b with adamw, qwen2.5-7b with
# adamw8bit; random weights, seq 1024, batches as in RESULTS.md's streaming
# section). Per model:
#   (a) `lazytrain profile --model` on the GPU: hw.yaml with measured stage times;
#   (b) `lazytrain train` streaming, exec.schedule every_k (keep_every 4): its GPU peak;
#   (c) the same run with exec.schedule auto, exec.hardware hw.yaml and
#       exec.device_memory_gb = that peak (equal GPU memory), same batch;
#       the planner chooses the chunking (LT_BENCH_AUTO_MICRO: 0) unless
#       LT_BENCH_AUTO_MICRO gives one;
#   (d) `lazytrain plan` with no --batch-size at the same GPU memory (the
#       planner chooses the batch) and, when it picks another batch, (c) again
#       at that batch (auto_batch);
#   (e) tables: median tokens/s after the warm-up steps, auto/fixed, the
#       plan's predicted step vs the measured median step (goal: within
#       10%), GPU peaks and the plan's placement counts.
# Both runs of a model load one bf16 checkpoint of tiled values that
# bench/tiled_checkpoint.py writes first (model.init: random would take ~2
# minutes per 7B run); each run is stopped once metrics.jsonl has all its
# steps, before the trainer's final save (30 GB for the 7B shape).
# Writes OUT_DIR/<model>/{hw.yaml, profile.log, fixed.log, auto.log, fixed/,
# auto/, and for (d) hw_cap.yaml, plan_batch.json, plan_batch.log and, when
# the planner's batch differs, auto_batch.log and auto_batch/} and
# OUT_DIR/summary.json; prints the tables. Needs build-gpu
# (bench/gpu.sh OUT build).
# Usage: bench/plan_vs_fixed.sh OUT_DIR
# Env (defaults are the H200 run; the others let it run on the CPU with a
# fixture, e.g. LT_BENCH_BIN=build-plan/lazytrain LT_BENCH_DEVICE=cpu
# LT_BENCH_DTYPE=f32 LT_BENCH_MODELS=tests/models/fixtures/families/qwen2:adamw:4
# LT_BENCH_SEQ=32 LT_BENCH_MICRO=2 LT_BENCH_PROFILE_BATCHES=1,2
# LT_BENCH_PROFILE_OPTS="--disk-mb 4 --repeats 1" LT_BENCH_DEVICE_GB=0.001
# LT_BENCH_INIT=random):
#   LT_BENCH_BIN (build-gpu/lazytrain), LT_BENCH_DEVICE (cuda), LT_BENCH_DTYPE (bf16),
#   LT_BENCH_MODELS ("qwen2.5-3b:adamw:64 qwen2.5-7b:adamw8bit:48": a folder
#     under bench/models or a path with config.json, the optimizer, the batch),
#   LT_BENCH_AUTO_MICRO (0: the planner's chunking), LT_BENCH_SEQ (1024), LT_BENCH_STEPS (5), LT_BENCH_WARMUP (2 steps left out
#   of the medians), LT_BENCH_MICRO (8 sequences per chunk),
#   LT_BENCH_PROFILE_BATCHES (8,16), LT_BENCH_PROFILE_OPTS ("--disk-mb 256 --repeats 3"),
#   LT_BENCH_INIT (tiled; random: model.init random instead of a checkpoint),
#   LT_BENCH_RUN_TIMEOUT (200 s per training run),
#   LT_BENCH_DEVICE_GB (unset: the fixed run's measured GPU peak is the
#     memory both are compared at; set: both runs get this exec.device_memory_gb.
#     The CPU stand-in's measured peak is below what the planner budgets, so
#     on the CPU give a cap both fit in).
set -uo pipefail
out=${1:?usage: bench/plan_vs_fixed.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
if [ -d .devdeps ]; then
  export LD_LIBRARY_PATH=$PWD/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
bin=${LT_BENCH_BIN:-build-gpu/lazytrain}
device=${LT_BENCH_DEVICE:-cuda}
dtype=${LT_BENCH_DTYPE:-bf16}
models=${LT_BENCH_MODELS:-"qwen2.5-3b:adamw:64 qwen2.5-7b:adamw8bit:48"}
seq=${LT_BENCH_SEQ:-1024}
steps=${LT_BENCH_STEPS:-5}
warmup=${LT_BENCH_WARMUP:-2}
micro=${LT_BENCH_MICRO:-8}
auto_micro=${LT_BENCH_AUTO_MICRO:-0}
profile_batches=${LT_BENCH_PROFILE_BATCHES:-8,16}
profile_opts=${LT_BENCH_PROFILE_OPTS:-"--disk-mb 256 --repeats 3"}
init=${LT_BENCH_INIT:-tiled}
run_timeout=${LT_BENCH_RUN_TIMEOUT:-200}
device_gb=${LT_BENCH_DEVICE_GB:-}
fixed_cap=()
[ -n "$device_gb" ] && fixed_cap=(--set exec.device_memory_gb="$device_gb")
status=0
nvidia-smi --query-gpu=name,memory.total --format=csv > "$out/gpu.txt" 2>&1 || true
nproc > "$out/cpus.txt"

# Random tokens, enough rows for every step of the largest batch.
make_data() {  # path rows vocab
  python3 - "$1" "$2" "$3" "$seq" <<'PY'
import json, random, sys
path, rows, vocab, seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(0)
with open(path, "w") as f:
    for _ in range(rows):
        ids = [rng.randrange(vocab) for _ in range(seq)]
        f.write(json.dumps({"input_ids": ids, "labels": ids}) + "\n")
PY
}

# A streaming training config (the schedule comes with --set).
write_config() {  # path model_dir data out_dir optimizer batch
  cat > "$1" <<YAML
model:
  path: "$2"
  init: $model_init
data:
  path: "$3"
  format: tokens
  pack: false
train:
  steps: $steps
  batch_size: $6
  grad_accum: 1
  seq_len: $seq
  grad_clip: 1.0
  seed: 0
  device: $device
  dtype: $dtype
  eval_every: 0
  save_every: 0
  keep_last: 1
optim:
  name: $5
  lr: 1.0e-5
sched:
  name: constant
  warmup_steps: 0
exec:
  mode: streaming
  micro_batch: $micro
out:
  dir: "$4"
YAML
}

# `lazytrain train` until metrics.jsonl has every step, then stopped (no
# final save); fails when it ends or times out before that.
run_train() {  # log out_dir train-args...
  local log=$1 dir=$2
  shift 2
  rm -rf "$dir"
  "$bin" train "$@" > "$log" 2>&1 &
  local pid=$! deadline=$((SECONDS + run_timeout)) done=0
  while kill -0 "$pid" 2>/dev/null; do
    if [ -f "$dir/metrics.jsonl" ] && [ "$(wc -l < "$dir/metrics.jsonl")" -ge "$steps" ]; then
      done=1
      break
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "timed out after $run_timeout s" >> "$log"
      break
    fi
    sleep 0.5
  done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rm -rf "$dir"/.step-* "$dir"/step-*
  [ -f "$dir/metrics.jsonl" ] && [ "$(wc -l < "$dir/metrics.jsonl")" -ge "$steps" ] && done=1
  [ "$done" = 1 ]
}

# The checkpoint takes disk space the next model's needs.
drop_weights() { [ "$init" = random ] || rm -rf "$weights"; }

for spec in $models; do
  IFS=: read -r name optim batch <<< "$spec"
  model_dir=$name
  [ -d "$model_dir" ] || model_dir=bench/models/$name
  [ -f "$model_dir/config.json" ] || { echo "no $model_dir/config.json"; status=1; continue; }
  tag=$(basename "$model_dir")_${optim}_b$batch
  dir=$out/$tag
  mkdir -p "$dir"
  vocab=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$model_dir/config.json")
  make_data "$dir/data.jsonl" $(( batch * steps )) "$vocab"
  chunk=$(( micro < batch ? micro : batch ))
  if [ "$init" = random ]; then
    weights=$model_dir
    model_init=random
  else
    weights=$dir/weights
    model_init=pretrained
    python3 bench/tiled_checkpoint.py "$model_dir/config.json" "$weights" \
      || { echo "no checkpoint for $tag"; status=1; continue; }
  fi

  echo "== $tag: profile (stage times at batch $profile_batches, seq $seq)"
  # shellcheck disable=SC2086
  timeout 300 "$bin" profile --model "$model_dir" --seq-len "$seq" --batch-sizes "$profile_batches" \
    --disk-path "$dir" $profile_opts --out "$dir/hw.yaml" > "$dir/profile.log" 2>&1 \
    || { echo "profile failed (see $dir/profile.log)"; tail -5 "$dir/profile.log"; status=1; drop_weights; continue; }
  grep -E "^(gpu_tflops|h2d_gbps|bidir_gbps|cpu_adam)|stage_times|block_(forward|backward)|head_step" "$dir/hw.yaml"

  echo "== $tag: fixed policy (every_k, keep_every 4), batch $batch, chunks of $chunk"
  write_config "$dir/fixed.yaml" "$weights" "$dir/data.jsonl" "$dir/fixed" "$optim" "$batch"
  run_train "$dir/fixed.log" "$dir/fixed" --config "$dir/fixed.yaml" --set exec.schedule=every_k \
    --set exec.keep_every=4 "${fixed_cap[@]}" || { echo "fixed run failed (see $dir/fixed.log)"; tail -5 "$dir/fixed.log"; status=1; drop_weights; continue; }
  peak_gb=$(python3 - "$dir/fixed/metrics.jsonl" <<'PY'
import json, sys
peak = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    p = r.get("peak_bytes", {})
    peak = max(peak, p.get("gpu", p.get("device", 0)))
print(f"{peak / 1e9:.9f}")
PY
)
  echo "fixed GPU peak: $peak_gb GB"
  [ -n "$device_gb" ] && peak_gb=$device_gb

  echo "== $tag: planned (exec.schedule auto) at exec.device_memory_gb = $peak_gb"
  write_config "$dir/auto.yaml" "$weights" "$dir/data.jsonl" "$dir/auto" "$optim" "$batch"
  run_train "$dir/auto.log" "$dir/auto" --config "$dir/auto.yaml" --set exec.schedule=auto \
    --set exec.hardware="$dir/hw.yaml" --set exec.device_memory_gb="$peak_gb" \
    --set exec.disk_path="$dir" --set exec.micro_batch="$auto_micro" || { echo "auto run failed (see $dir/auto.log)"; tail -5 "$dir/auto.log"; status=1; }
  grep -E "exec.schedule auto|predicted step|stage times" "$dir/auto.log" | head -4

  # (d) The batch chosen too: `lazytrain plan` at the same GPU memory with
  # no --batch-size, then that batch trained under exec.schedule auto. Only
  # on a GPU: `plan` plans bf16 compute, the CPU stand-in runs f32.
  rm -rf "$dir/auto_batch" "$dir/auto_batch.log" "$dir/plan_batch.json"
  auto_batch=0
  if [ "$device" = cuda ]; then
    sed -E "s/^gpu_memory_gb:.*/gpu_memory_gb: $peak_gb/" "$dir/hw.yaml" > "$dir/hw_cap.yaml"
    plan_micro=()
    [ "$auto_micro" != 0 ] && plan_micro=(--micro-batch "$auto_micro")
    "$bin" plan --model "$model_dir" --hardware "$dir/hw_cap.yaml" --seq-len "$seq" \
      --optimizer "$optim" "${plan_micro[@]}" --json > "$dir/plan_batch.json" 2> "$dir/plan_batch.log"
    auto_batch=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(j['batch_size'] if j.get('feasible') else 0)" \
      "$dir/plan_batch.json" 2>/dev/null || echo 0)
    echo "planner's batch at $peak_gb GB: $auto_batch (0: none; see $dir/plan_batch.log)"
  fi
  if [ "${auto_batch:-0}" -gt 0 ] && [ "$auto_batch" != "$batch" ]; then
    make_data "$dir/data_batch.jsonl" $(( auto_batch * steps )) "$vocab"
    write_config "$dir/auto_batch.yaml" "$weights" "$dir/data_batch.jsonl" "$dir/auto_batch" "$optim" "$auto_batch"
    run_train "$dir/auto_batch.log" "$dir/auto_batch" --config "$dir/auto_batch.yaml" --set exec.schedule=auto \
      --set exec.hardware="$dir/hw.yaml" --set exec.device_memory_gb="$peak_gb" \
      --set exec.disk_path="$dir" --set exec.micro_batch="$auto_micro" || { echo "auto-batch run failed (see $dir/auto_batch.log)"; tail -5 "$dir/auto_batch.log"; status=1; }
    grep -E "exec.schedule auto|predicted step" "$dir/auto_batch.log" | head -3
  fi
  drop_weights
done

# shellcheck disable=SC2086 # one argument per model spec
python3 - "$out" "$warmup" $models <<'PY'
import json, os, re, statistics, sys
out, warmup, specs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def runs(path):
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]

def summary(rows):
    timed = rows[warmup:] or rows[-1:]
    if not timed:
        return None
    peak = max(max(r["peak_bytes"].get("gpu", r["peak_bytes"].get("device", 0)) for r in rows), 0)
    s = {"steps": len(rows), "timed_steps": len(timed),
         "tokens_per_s": statistics.median(r["tokens_per_s"] for r in timed),
         "step_s": statistics.median(r["step_s"] for r in timed),
         "peak_gb": peak / 1e9}
    # Where the measured step goes (medians), to set beside the prediction.
    for key in ("compute_s", "recompute_s", "exposed_h2d_s", "exposed_d2h_s", "exposed_disk_s",
                "optimizer_s", "bubbles_s"):
        if key in timed[0]:
            s[key] = statistics.median(r[key] for r in timed)
    if "predicted_step_s" in timed[0]:
        s["predicted_step_s"] = timed[0]["predicted_step_s"]
    return s

results = []
for spec in specs:
    name, optim, batch = spec.split(":")
    tag = f"{os.path.basename(name.rstrip('/'))}_{optim}_b{batch}"
    d = os.path.join(out, tag)
    fixed, auto = summary(runs(f"{d}/fixed/metrics.jsonl")), summary(runs(f"{d}/auto/metrics.jsonl"))
    auto_batch = summary(runs(f"{d}/auto_batch/metrics.jsonl"))
    r = {"model": tag, "optimizer": spec.split(":")[1], "batch": int(spec.split(":")[2]),
         "fixed": fixed, "auto": auto, "auto_batch": auto_batch}
    m = re.search(r"exec.schedule auto: batch (\d+), chunks of (\d+)", open(f"{d}/auto.log", errors="replace").read()) if os.path.exists(f"{d}/auto.log") else None
    r["auto_chunk"] = int(m.group(2)) if m else None
    pj = f"{d}/plan_batch.json"
    if os.path.exists(pj):
        try:
            j = json.load(open(pj))
            r["planner_batch"] = j.get("batch_size") if j.get("feasible") else None
        except ValueError:
            r["planner_batch"] = None
    if os.path.exists(f"{d}/auto_batch.log"):
        log = open(f"{d}/auto_batch.log", errors="replace").read()
        m = re.search(r"exec.schedule auto: batch (\d+), chunks of (\d+)", log)
        r["auto_batch_size"], r["auto_batch_chunk"] = (int(m.group(1)), int(m.group(2))) if m else (None, None)
        if fixed and auto_batch:
            r["auto_batch_over_fixed"] = auto_batch["tokens_per_s"] / fixed["tokens_per_s"]
            if "predicted_step_s" in auto_batch:
                r["auto_batch_predicted_over_measured"] = auto_batch["predicted_step_s"] / auto_batch["step_s"]
    log = open(f"{d}/auto.log", errors="replace").read() if os.path.exists(f"{d}/auto.log") else ""
    m = re.search(r"boundaries \(([^)]*)\)", log)
    r["auto_placements"] = m.group(1) if m else None
    m = re.search(r"predicted peaks: .*?gpu ([0-9.]+) GB", log)
    r["auto_predicted_gpu_gb"] = float(m.group(1)) if m else None
    m = re.search(r"stage times: (.*)", log)
    r["auto_stage_times"] = m.group(1).strip() if m else None
    if fixed and auto:
        r["auto_over_fixed"] = auto["tokens_per_s"] / fixed["tokens_per_s"]
        if "predicted_step_s" in auto:
            r["predicted_over_measured"] = auto["predicted_step_s"] / auto["step_s"]
    results.append(r)
json.dump(results, open(os.path.join(out, "summary.json"), "w"), indent=2)

print("\n| model | optim | batch | fixed tok/s | auto tok/s | auto/fixed | predicted step s | measured step s | pred/meas | fixed GPU GB | auto GPU GB (predicted) | plan placements |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
f = lambda v, p: "-" if v is None else f"{v:.{p}f}"
for r in results:
    fx, au = r["fixed"] or {}, r["auto"] or {}
    print(f"| {r['model']} | {r['optimizer']} | {r['batch']} | {f(fx.get('tokens_per_s'), 0)} | "
          f"{f(au.get('tokens_per_s'), 0)} | {f(r.get('auto_over_fixed'), 3)} | "
          f"{f(au.get('predicted_step_s'), 3)} | {f(au.get('step_s'), 3)} | "
          f"{f(r.get('predicted_over_measured'), 3)} | {f(fx.get('peak_gb'), 3)} | "
          f"{f(au.get('peak_gb'), 3)} ({f(r.get('auto_predicted_gpu_gb'), 3)}) | "
          f"{r['auto_placements'] or '-'} |")
print("\n| model | auto chunk | planner's batch (chunk) | tok/s | over fixed | pred/meas | GPU GB |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for r in results:
    ab = r.get("auto_batch") or {}
    print(f"| {r['model']} | {r.get('auto_chunk') or '-'} | {r.get('auto_batch_size') or r.get('planner_batch') or '-'} ({r.get('auto_batch_chunk') or '-'}) | "
          f"{f(ab.get('tokens_per_s'), 0)} | {f(r.get('auto_batch_over_fixed'), 3)} | "
          f"{f(r.get('auto_batch_predicted_over_measured'), 3)} | {f(ab.get('peak_gb'), 3)} |")
parts = ("compute_s", "recompute_s", "exposed_h2d_s", "exposed_d2h_s", "exposed_disk_s",
         "optimizer_s", "bubbles_s")
print("\n| model | run | " + " | ".join(p[:-2] for p in parts) + " |")
print("| --- | --- |" + " --- |" * len(parts))
for r in results:
    for run in ("fixed", "auto", "auto_batch"):
        x = r.get(run) or {}
        print(f"| {r['model']} | {run} | " + " | ".join(f(x.get(p), 3) for p in parts) + " |")
for r in results:
    print(f"{r['model']}: stage times {r['auto_stage_times'] or '-'}")
    # Equal GPU memory holds only while the planned runs stay within the
    # fixed run's peak (the memory they were planned for, unless
    # LT_BENCH_DEVICE_GB gave both runs a cap).
    fx = (r.get("fixed") or {}).get("peak_gb") if not os.environ.get("LT_BENCH_DEVICE_GB") else None
    for run in ("auto", "auto_batch"):
        x = (r.get(run) or {}).get("peak_gb")
        if fx and x and x > fx:
            print(f"WARNING: {r['model']} {run} peaked at {x:.3f} GB, over the fixed run's "
                  f"{fx:.3f} GB it was planned for: not at equal GPU memory")
PY
exit $status
