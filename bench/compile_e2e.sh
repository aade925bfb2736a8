#!/usr/bin/env bash
# Issue 24's end-to-end figures: `lazytrain train` (resident, bf16, AdamW,
# clipping 1.0, random init) with train.compile off, on and auto (on a GPU:
# each kind of chain timed both ways on the first steps, the faster kept;
# autograd/chain_choice.h), in the same call, for GPT-2 124M (bench/models/gpt2-124m, batch 64 x 1024, as
# bench/gpt2_124m.sh) and the Qwen2.5-3B shape (bench/models/qwen2.5-3b,
# batch 8 x 1024, as bench/train_3b.sh's ResidentBench). Prints, per run,
# tokens/s over the wall time of the timed steps (the steps after the
# second: the first traces and compiles the forward, the second the
# backward), the median step, and the run's compile line (block programs,
# chains fused, kernels compiled / from disk).
#
# The GPU machine's build has no MLIR, so the chains' cubins are compiled
# here first (models::block_kernel_graphs through GpuKernelPrebuild.*) into
# the folder that travels with the build, which the runs read as their
# kernel cache (XDG_CACHE_HOME):
#   here:     bench/pack_gpu_build.sh ...            (the packed build, as for bench/gpu.sh)
#             bench/compile_e2e.sh prebuild BUILD_WITH_MLIR
#   the H200: bench/gpu.sh OUT unpack && bench/compile_e2e.sh OUT
#             (carry ["build-carry"]; about 5 minutes)
# Env: LT_CARRY_DIR (default build-carry): kernels in $LT_CARRY_DIR/gpu-kernels;
#      LT_GPU_KERNELS overrides that folder; LT_BENCH_STEPS (metrics lines a run
#      waits for, default 10); LT_E2E_MODELS (default "gpt2-124m qwen2.5-3b");
#      LT_BENCH_BATCH, LT_BENCH_SEQ (sequences a step and their length: a
#      smaller run); LT_BENCH_BIN (default build-gpu/lazytrain); LT_BENCH_DTYPE
#      (train.dtype, default bf16; f32 for a try on the CPU); LT_E2E_MODES
#      (default "off on auto").
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
kernels=${LT_GPU_KERNELS:-$root/${LT_CARRY_DIR:-build-carry}/gpu-kernels}
models=${LT_E2E_MODELS:-gpt2-124m qwen2.5-3b}
if [ "${1:-}" = prebuild ]; then
  build=${2:?usage: bench/compile_e2e.sh prebuild BUILD_DIR (built with MLIR)}
  cmake --build "$build" --target test_compile || exit 1
  mkdir -p "$kernels"
  list=""
  for m in $models; do list=$list${list:+:}$root/bench/models/$m; done
  LT_PREBUILD_GPU_KERNELS=$kernels LT_PREBUILD_MODELS=$list "$build/test_compile" \
    --gtest_filter='GpuKernelPrebuild.*' || exit 1
  du -sh "$kernels"
  exit 0
fi
out=${1:?usage: bench/compile_e2e.sh OUT_DIR | prebuild BUILD_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -d "$kernels" ] || { echo "no kernel folder $kernels: run 'prebuild' where MLIR is"; exit 1; }
[ -d .devdeps ] && export LD_LIBRARY_PATH=$PWD/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The libraries bench/gpu.sh's unpack put beside a packed build.
carry_libs=$root/${LT_CARRY_DIR:-build-carry}/x/lib
[ -d "$carry_libs" ] && export LD_LIBRARY_PATH=$carry_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The runs' kernel cache (KernelCache::default_folder): a copy of the carried
# folder, so that the carried one stays as packed.
mkdir -p "$out/cache/lazytrain"
rm -rf "$out/cache/lazytrain/kernels"
cp -r "$kernels" "$out/cache/lazytrain/kernels"
export XDG_CACHE_HOME=$out/cache
steps=${LT_BENCH_STEPS:-10}
seq=${LT_BENCH_SEQ:-1024}
bin=${LT_BENCH_BIN:-build-gpu/lazytrain}
status=0

for model in $models; do
  case $model in
    gpt2-124m) batch=${LT_BENCH_BATCH:-64} ;;
    *) batch=${LT_BENCH_BATCH:-8} ;;
  esac
  config=bench/models/$model/config.json
  vocab=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$config")
  python3 - "$out/$model.jsonl" "$vocab" "$((batch * (steps + 2)))" "$seq" <<'PY'
import json, random, sys
random.seed(0)
vocab = int(sys.argv[2])
with open(sys.argv[1], "w") as f:
    for _ in range(int(sys.argv[3])):
        ids = [random.randrange(vocab) for _ in range(int(sys.argv[4]))]
        f.write(json.dumps({"input_ids": ids, "labels": ids}) + "\n")
PY
  for compile in ${LT_E2E_MODES:-off on auto}; do
    run=$out/$model-$compile
    rm -rf "$run"
    cat > "$run.yaml" <<YAML
model:
  path: $root/bench/models/$model
  init: random
data:
  path: $out/$model.jsonl
  format: tokens
train:
  steps: 1000
  batch_size: $batch
  seq_len: $seq
  grad_clip: 1.0
  save_every: 0
  dtype: ${LT_BENCH_DTYPE:-bf16}
  compile: $compile
optim:
  name: adamw
  lr: 1.0e-5
exec:
  mode: resident
out:
  dir: $run
YAML
    echo "== $model, train.compile $compile (resident bf16, batch $batch x $seq)"
    # Tokens/s over the wall time of steps 3.. (bench/watch_train.py).
    python3 bench/watch_train.py "$bin" "$run.yaml" "$run" "$run.log" "$steps" 150 \
      "{\"model\": \"$model\", \"compile\": \"$compile\"}" | tee -a "$out/summary.txt" ||
      status=1
    grep -E "compile[: ]|rror" "$run.log" | grep -v "^  compile:" | head -6
  done
done

python3 - "$out/summary.txt" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    if line.startswith("RESULT "):
        r = json.loads(line[7:])
        rows[(r["model"], r["compile"])] = r
print("\n| model | train.compile | tokens/s over wall | median step s | steps 1, 2 s | GPU peak GB |")
print("| --- | --- | --- | --- | --- | --- |")
for (model, mode), r in rows.items():
    print(f"| {model} | {mode} | {r['tokens_per_s_wall']:.0f} | {r['median_step_s']:.4f} | "
          f"{r['first_step_s']}, {r['second_step_s']} | {r['peak_gb']} |")
for model in dict.fromkeys(m for m, _ in rows):
    for mode in ("on", "auto"):
        if (model, mode) in rows and (model, "off") in rows:
            run, off = rows[(model, mode)], rows[(model, "off")]
            print(f"{model}: {mode} / off tokens/s over wall "
                  f"{run['tokens_per_s_wall'] / off['tokens_per_s_wall']:.3f}, "
                  f"median step {run['median_step_s'] / off['median_step_s']:.3f}")
PY
exit $status
