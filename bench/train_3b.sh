#!/usr/bin/env bash
# The 3B benchmark on the GPU machine: lazytrain resident bf16 training of
# the Qwen2.5-3B-shaped model (bench/models/qwen2.5-3b, random weights) and
# PyTorch's equivalent (tools/reference/torch_baseline.py), one after the
# other in the same call, then lazytrain's per-op-class profile.
# Needs build-gpu (bench/gpu.sh build). Usage: bench/train_3b.sh OUT_DIR
# Env: LT_BENCH_LAYERS / LT_BENCH_BATCH / LT_BENCH_SEQ / LT_BENCH_STEPS shrink
# the run; LT_BENCH_GEMM_TFLOPS is the GEMM rate the floor uses (GemmBench).
set -uo pipefail
out=${1:?usage: bench/train_3b.sh OUT_DIR}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ -d .devdeps ]; then
  export LD_LIBRARY_PATH=$PWD/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
config=bench/models/qwen2.5-3b/config.json
steps=${LT_BENCH_STEPS:-6}
layer_arg=()
[ -n "${LT_BENCH_LAYERS:-}" ] && layer_arg=(--layers "$LT_BENCH_LAYERS")
status=0
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1

echo "== lazytrain resident bf16"
LT_BENCH=1 LT_BENCH_STEPS=$steps timeout 240 ./build-gpu/test_gpu \
  --gtest_filter='ResidentBench.*' > "$out/lazytrain_3b.log" 2>&1 || status=1
grep -E '^step|RESULT|FAILED|rror' "$out/lazytrain_3b.log" | tail -12

echo "== pytorch (transformers Qwen2ForCausalLM, bf16 autocast, sdpa, fused AdamW)"
timeout 240 python3 tools/reference/torch_baseline.py "$config" --batch "${LT_BENCH_BATCH:-8}" \
  --seq "${LT_BENCH_SEQ:-1024}" --steps "$steps" "${layer_arg[@]}" \
  > "$out/torch_3b.log" 2>&1 || status=1
grep -E '^step|RESULT|rror' "$out/torch_3b.log" | tail -12

echo "== lazytrain profile (LT_OP_PROFILE=1, one step after the warm-up)"
LT_BENCH=1 LT_OP_PROFILE=1 LT_BENCH_STEPS=1 timeout 200 ./build-gpu/test_gpu \
  --gtest_filter='ResidentBench.*' > "$out/lazytrain_profile.log" 2>&1 || status=1
grep PROFILE "$out/lazytrain_profile.log" | sed 's/^PROFILE //'

python3 - "$out/lazytrain_3b.log" "$out/torch_3b.log" <<'PY'
import json, sys
rows = {}
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            rows[r["system"]] = r
print("\n| system | tokens/s | TFLOP/s (6NT) | median step s | GPU peak GB |")
print("| --- | --- | --- | --- | --- |")
for name in ("lazytrain", "pytorch"):
    r = rows.get(name)
    if r:
        print(f"| {name} | {r['tokens_per_s']:.0f} | {r['tflops']:.1f} | {r['median_step_s']:.3f} | {r['peak_gb']:.1f} |")
    else:
        print(f"| {name} | failed | | | |")
if "lazytrain" in rows and "pytorch" in rows:
    print(f"\nratio lazytrain / pytorch tokens/s: {rows['lazytrain']['tokens_per_s'] / rows['pytorch']['tokens_per_s']:.3f}")
PY
exit $status
