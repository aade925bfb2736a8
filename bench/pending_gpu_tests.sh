#!/usr/bin/env bash
# The GPU tests written since the last device run (sessions 14-15), in one
# device call of a few minutes, with a packed build and its prebuilt kernels:
#   here:     bench/pack_gpu_build.sh build && bench/compile_e2e.sh prebuild build
#             (build configured with MLIR: the kernels for the fixtures and
#             gpt2-124m go to build-carry/gpu-kernels)
#   the H200: bench/pending_gpu_tests.sh OUT      (carry ["build-carry"])
# Each group runs under its own timeout, most needed first, so that one that
# hangs leaves the others' results:
#   1. issue 21: NcclOneRank.* (offload's per-stage reduces and ZeRO-1's
#      stage groups through a 1-rank NCCL communicator);
#   2. issue 24: every compiled chain against float64 (lookups included),
#      train.compile on every executor and the compiled optimizer and
#      cross-entropy kernels (cubins from the prebuilt folder);
#   3. issue 26: staged checkpoints, states made a stage at a time, f32
#      uploads, the streaming trainer.
# Prints each group's passed/failed lines; logs in OUT.
# Usage: bench/pending_gpu_tests.sh OUT_DIR
set -uo pipefail
out=${1:?usage: bench/pending_gpu_tests.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
bash bench/gpu.sh "$out" unpack > "$out/unpack.log" 2>&1 || { tail "$out/unpack.log"; exit 1; }
carry=${LT_CARRY_DIR:-build-carry}
export LD_LIBRARY_PATH=$root/$carry/x/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LT_GPU_KERNELS=$root/$carry/gpu-kernels NCCL_NVLS_ENABLE=0
status=0
group() {  # NAME SECONDS FILTER
  timeout "$2" build-gpu/test_gpu --gtest_filter="$3" > "$out/$1.log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || status=1
  echo "== $1 (exit $rc$([ $rc -eq 124 ] && echo ': timed out'))"
  grep -E '^\[  (PASSED|FAILED) |^\[  FAILED|^\[  SKIPPED' "$out/$1.log" | head -20
  # A failure's first lines (the device keeps few files: the reason must
  # reach the caller's output).
  grep -E -A4 'Failure$|^unknown file|C\+\+ exception' "$out/$1.log" | head -40
}
# LT_PENDING_GROUPS: which groups (default all).
groups=${LT_PENDING_GROUPS:-issue21 issue24 issue26}
for g in $groups; do
  case $g in
    issue21) group issue21 120 'NcclOneRank*' ;;
    issue24) group issue24 180 'CompiledKernelsGpu.*:*TrainCompile*:*CompiledAdamW8bitGpu*:*CrossEntropyChainGpu*' ;;
    issue26) group issue26 180 'SetupMemoryGpu.*:StagedCheckpointGpu.*:F32UploadsGpu.*:StreamingTrainerGpu.*' ;;
  esac
done
exit $status
