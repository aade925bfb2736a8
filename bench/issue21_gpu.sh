#!/usr/bin/env bash
# Issue 21 on the one-GPU machine (nvidia-h200), in one device call of
# about a minute, with a packed build (bench/pack_gpu_build.sh build; carry
# ["build-carry"]): the NCCL path of data parallel that one GPU can run.
#   1. tests/gpu/nccl_one_rank_gpu_test: a 1-rank NCCL communicator through
#      the resident executor (one bucket, and 4 KB buckets all-reduced on
#      the communication stream during the backward) equals the run
#      without one; the sum is the identity; collectives started on the
#      communication stream (buckets, all-gathers of host buffers through
#      pinned buffers) finish oldest first, one wait at a time
#      (NcclOneRank.StartedCollectivesFinishOldestFirst); two ranks on one
#      GPU are refused, not hung.
#   2. tests/gpu/nccl_cpu_master_gpu_test: the same communicator through
#      the streaming and offload executors (each stage's gradients reduced
#      on the device before the download; with ZeRO-1 reduce-scattered,
#      the shard downloaded, the masters all-gathered through the device
#      and the pinned bf16 copies refreshed) equals the run without one
#      (NcclOneRank.CpuMasterExecutorsEqualTheRunWithoutACommunicator),
#      also ZeRO-1 over weights in a cudaHostRegister'ed POSIX shm segment
#      (dist.share_weights: the bf16 copies the GPU uploads from in it).
# (`launch --nproc 1` would not reach NCCL: a world of one rank runs as
# one process. tests/gpu/data_parallel_gpu_test needs 2 GPUs: skipped here.)
# Usage: bench/issue21_gpu.sh OUT_DIR
set -uo pipefail
out=${1:?usage: bench/issue21_gpu.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
bash bench/gpu.sh "$out" unpack > "$out/unpack.log" 2>&1 || { tail "$out/unpack.log"; exit 1; }
export LD_LIBRARY_PATH=$PWD/build-carry/x/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "== GPU tests"
(cd build-gpu && timeout 240 ./test_gpu --gtest_filter='NcclOneRank*:DataParallelGpu*' \
  > "$out/gputest.log" 2>&1)
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|SKIPPED" "$out/gputest.log"
