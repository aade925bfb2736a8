#!/usr/bin/env bash
# Issue 20's measurements in one device call (about 9 minutes), with a
# packed build (bench/pack_gpu_build.sh build; carry ["build-carry"]):
#   1. the GPU tests of the offload executors and of the kernels that are
#      still opt-in (the fused head, the one-pass LayerNorm backward);
#   2. the 3B at a 24 GB budget: resident (the reference), ZenFlow with
#      the early download, synchronous offload (bench/offload_3b.sh);
#   3. the 7B with exec.mode auto on the whole GPU, as a user's first run
#      (its profile measured by the run itself; bench/auto_7b.sh).
# Scratch goes to /tmp (the data files are too large to bring back); the
# logs and summaries to OUT_DIR. Usage: bench/issue20_gpu.sh OUT_DIR
set -uo pipefail
out=${1:?usage: bench/issue20_gpu.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
work=/tmp/lt-issue20
rm -rf "$work" && mkdir -p "$work"
bash bench/gpu.sh "$out" unpack > "$out/unpack.log" 2>&1 || { tail "$out/unpack.log"; exit 1; }
export LD_LIBRARY_PATH=$PWD/build-carry/x/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "== GPU tests"
(cd build-gpu && timeout 240 ./test_gpu \
  --gtest_filter='OffloadGpu*:ColumnsGpu*:StreamingGpu*:AdamW*:ClassifierGpu*:LayerNormFusedGpu*:ResidentGpu*' \
  > "$out/gputest.log" 2>&1)
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$out/gputest.log"
echo "== 3B: resident, ZenFlow, offload"
timeout 260 bash bench/offload_3b.sh "$work/3b" resident zenflow offload > "$out/3b.log" 2>&1
cp "$work/3b/summary.txt" "$out/3b_summary.txt" 2>/dev/null
grep -E "tokens/s|exposed|no metrics|too few" "$out/3b.log"
echo "== 7B, exec.mode auto"
timeout 200 bash bench/auto_7b.sh "$work/7b" 8 10 > "$out/7b.log" 2>&1
cp "$work/7b/train.log" "$out/7b_train.log" 2>/dev/null
tail -25 "$out/7b.log"
