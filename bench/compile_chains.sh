#!/usr/bin/env bash
# Issue 24's GPU table: per named chain, the fusion compiler's kernel against
# the hand-written ops:: kernel and the unfused op sequence, in ms and as
# bytes moved over time against the H200's 4.3 TB/s
# (tests/gpu/compiled_kernels_gpu_bench.cpp), after the GPU correctness
# tests (CompiledKernelsGpu.*: every chain and 60 fixed-seed random graphs
# against the float64 interpreter; FusedProgramsGpu.*: fused programs
# against autograd's unfused CUDA kernels).
#
# The GPU machine's build has no MLIR, so its kernels are compiled here first,
# into a folder that travels with the build (docs/compiler.md, "Kernels for a
# machine without MLIR"):
#   here:     bench/pack_gpu_build.sh BUILD_GPU      (if carrying a packed build)
#             bench/compile_chains.sh prebuild BUILD_WITH_MLIR
#   the H200: bench/gpu.sh OUT unpack && bench/compile_chains.sh run OUT
#             (carry ["build-carry"], plus ".devdeps" as for bench/gpu.sh)
# Env: LT_CARRY_DIR (default build-carry): the kernels go to $LT_CARRY_DIR/gpu-kernels
#      (a few MB); LT_GPU_KERNELS overrides that folder for `run`.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
kernels=${LT_GPU_KERNELS:-$root/${LT_CARRY_DIR:-build-carry}/gpu-kernels}
case ${1:-} in
  prebuild)
    build=${2:?usage: bench/compile_chains.sh prebuild BUILD_DIR (built with MLIR)}
    cmake --build "$build" --target test_compile || exit 1
    mkdir -p "$kernels"
    LT_PREBUILD_GPU_KERNELS=$kernels "$build/test_compile" \
      --gtest_filter='GpuKernelPrebuild.*' || exit 1
    du -sh "$kernels" ;;
  run)
    out=${2:?usage: bench/compile_chains.sh run OUT_DIR [TEST_GPU]}
    test_gpu=${3:-build-gpu/test_gpu}
    mkdir -p "$out"
    [ -d "$kernels" ] || { echo "no kernel folder $kernels: run 'prebuild' where MLIR is"; exit 1; }
    export LT_GPU_KERNELS=$kernels
    # The libraries bench/gpu.sh's unpack put beside a packed build.
    carry_libs=$root/${LT_CARRY_DIR:-build-carry}/x/lib
    [ -d "$carry_libs" ] && export LD_LIBRARY_PATH=$carry_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    status=0
    "$test_gpu" --gtest_filter='CompiledKernelsGpu.*:*FusedProgramsGpu.*' \
      > "$out/compiled_kernels_gpu.log" 2>&1 || status=1
    grep -E '^\[  (PASSED|FAILED) |^\[       OK|^\[  FAILED' "$out/compiled_kernels_gpu.log"
    LT_BENCH=1 "$test_gpu" --gtest_filter='CompiledKernelsGpuBench.*' \
      > "$out/compile_chains_bench.log" 2>&1 || status=1
    grep -E '^chain|ms|FAILED' "$out/compile_chains_bench.log"
    exit $status ;;
  *)
    echo "usage: bench/compile_chains.sh prebuild BUILD_DIR | run OUT_DIR [TEST_GPU]"
    exit 2 ;;
esac
