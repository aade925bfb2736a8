#!/usr/bin/env bash
# One call on the GPU machine: build with CUDA, run the GPU tests, refresh
# the transformers reference fixtures, and check converted folders load in
# transformers. Usage: bench/gpu.sh OUT_DIR [steps...]
#   steps: build (or unpack: bench/pack_gpu_build.sh's) gputest cputest sanitizer gemmbench
#          attnbench fixtures convert
#          optimbench (CPU optimizers, 16 and 1 threads) planvsfixed (bench/plan_vs_fixed.sh)
#          pvf3b pvf7b (plan_vs_fixed.sh for one model, its results packed into pvf*.tar.xz)
#          stream7b (7B streaming, adamw8bit, batch 48, with host peaks) train3b (bench/train_3b.sh)
#          gpt2 qwen05b (bench/gpt2_124m.sh: GPT-2 124M, Qwen2.5-0.5B, against PyTorch eager/compiled)
#   (default: build gputest gemmbench fixtures convert)
set -uo pipefail
out=${1:?usage: bench/gpu.sh OUT_DIR [steps]}
shift
steps=${*:-build gputest gemmbench fixtures convert}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ -d .devdeps ]; then
  export CMAKE_PREFIX_PATH=$PWD/.devdeps/usr CPATH=$PWD/.devdeps/usr/include \
         LIBRARY_PATH=$PWD/.devdeps/usr/lib/x86_64-linux-gnu \
         LD_LIBRARY_PATH=$PWD/.devdeps/usr/lib/x86_64-linux-gnu
fi
status=0
run() { echo "== $*"; "$@" || { echo "FAILED: $*"; status=1; }; }
for step in $steps; do
  case $step in
    build)
      run cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLT_CUDA=ON \
          -DCMAKE_CUDA_ARCHITECTURES=90 -DLT_BUILD_BENCH=OFF > "$out/cmake.log" 2>&1
      # The program first, so a broken test file cannot block the steps after.
      run cmake --build build-gpu -j "$(nproc)" --target lazytrain > "$out/build.log" 2>&1
      run cmake --build build-gpu -j "$(nproc)" --target ${BUILD_TARGETS:-all} >> "$out/build.log" 2>&1
      tail -20 "$out/build.log"
      ./build-gpu/lazytrain info | tee "$out/info.txt" ;;
    unpack)
      # A build packed here by bench/pack_gpu_build.sh (carry build-carry):
      # no build on the device.
      carry=${LT_CARRY_DIR:-build-carry}
      mkdir -p build-gpu "$carry/x"
      tar -C build-gpu -xJf "$carry/bins.tar.xz" && tar -C "$carry/x" -xJf "$carry/libs.tar.xz" ||
        { echo "FAILED: unpack"; status=1; continue; }
      # An earlier build's ctest lists would not match these binaries.
      rm -f build-gpu/CTestTestfile.cmake
      export LD_LIBRARY_PATH=$PWD/$carry/x/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      [ "$(cat "$carry/commit.txt")" = "$(git rev-parse HEAD 2>/dev/null)" ] ||
        echo "WARNING: the packed build is of $(cat "$carry/commit.txt"), the sources of $(git rev-parse HEAD 2>/dev/null)"
      { read -r src_dir; read -r bin_dir; } < "$carry/paths.txt"
      for link in "$src_dir:$PWD" "$bin_dir:$PWD/build-gpu"; do
        if [ ! -e "${link%%:*}" ]; then
          mkdir -p "$(dirname "${link%%:*}")" && ln -sfn "${link#*:}" "${link%%:*}" ||
            { echo "FAILED: link ${link%%:*}"; status=1; }
        fi
      done
      echo "packed at $(cat "$carry/commit.txt"), uncommitted: $(wc -l < "$carry/dirty.txt") files"
      ./build-gpu/lazytrain info | tee "$out/info.txt" ;;
    gputest)
      if [ ! -f build-gpu/CTestTestfile.cmake ]; then  # unpacked: no ctest files
        (cd build-gpu && ./test_gpu) > "$out/gputest.log" 2>&1 || status=1
        tail -15 "$out/gputest.log"
        continue
      fi
      (cd build-gpu && ctest -L gpu --output-on-failure -j 4) > "$out/gputest.log" 2>&1 || status=1
      tail -15 "$out/gputest.log" ;;
    sanitizer)
      # compute-sanitizer memcheck over the GPU suite. The deliberate 1 TiB
      # cudaMalloc of the OOM test is an API error by design: excluded.
      timeout 400 compute-sanitizer --tool memcheck --error-exitcode 3 ./build-gpu/test_gpu \
        --gtest_filter='-CudaCachingAllocator.OutOfMemoryIsAClearError' > "$out/sanitizer.log" 2>&1 || status=1
      grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/sanitizer.log" | tail -5 ;;
    gemmbench)
      # cuBLASLt TFLOP/s: bf16 8192^3 and a 3B layer's products (tests/gpu/gemm_gpu_test.cpp).
      LT_BENCH=1 ./build-gpu/test_gpu --gtest_filter='GemmBench.*' > "$out/gemm_bench.log" 2>&1 || status=1
      grep -E 'TFLOP/s|GemmBench' "$out/gemm_bench.log" ;;
    attnbench)
      # Flash attention TFLOP/s (tests/gpu/attention_gpu_test.cpp) and PyTorch SDPA, same shapes.
      LT_BENCH=1 ./build-gpu/test_gpu --gtest_filter='AttentionBench.*' > "$out/attn_bench.log" 2>&1 || status=1
      python3 tools/reference/sdpa_baseline.py >> "$out/attn_bench.log" 2>&1 || status=1
      grep -E 'TFLOP/s|^torch ' "$out/attn_bench.log" ;;
    optimbench)
      run cmake -S . -B build-gpu -DLT_BUILD_BENCH=ON > /dev/null
      run cmake --build build-gpu -j "$(nproc)" --target optim_bench >> "$out/build.log" 2>&1
      for threads in 16 1; do
        LT_NUM_THREADS=$threads ./build-gpu/optim_bench --params 268435456 --runs 5 \
          > "$out/optim_bench_$threads.log" 2>&1 || status=1
        tail -12 "$out/optim_bench_$threads.log"
      done ;;
    planvsfixed)
      bash bench/plan_vs_fixed.sh "$out/plan_vs_fixed" || status=1 ;;
    pvf3b|pvf7b)
      # One model per call (the 7B takes ~7 minutes): its tables in
      # pvf_<model>.log, and everything but the weights and data in one
      # tarball (the device returns few files and shallow folders).
      spec="qwen2.5-3b:adamw:64"
      [ "$step" = pvf7b ] && spec="qwen2.5-7b:adamw8bit:48"
      LT_BENCH_MODELS="$spec" bash bench/plan_vs_fixed.sh "$out/$step" > "$out/$step.log" 2>&1 ||
        status=1
      tail -30 "$out/$step.log"
      tar -C "$out" -cJf "$out/$step.tar.xz" --exclude='*/weights*' --exclude='*data*.jsonl' \
        "$step" && rm -rf "${out:?}/$step" ;;
    stream7b)
      LT_BENCH_CONFIG=qwen2.5-7b LT_BENCH_OPTIM=adamw8bit LT_BENCH_BATCHES=48 \
        bash bench/train_3b_streaming.sh "$out/stream7b" || status=1 ;;
    train3b)
      bash bench/train_3b.sh "$out/train3b" || status=1 ;;
    gpt2)
      # Issue 25: GPT-2 124M, lazytrain train against PyTorch eager and
      # torch.compile, and the op profiles with the fused and the old head.
      bash bench/gpt2_124m.sh "$out/gpt2" lazytrain eager compile profile profile_unfused ||
        status=1 ;;
    qwen05b)
      # Issue 25: the Qwen2.5-0.5B shape, batch 16 (PyTorch eager's f32
      # logits of 64 x 1024 x 151936 would not fit beside the rest).
      LT_BENCH_MODEL=qwen2.5-0.5b LT_BENCH_BATCH=16 bash bench/gpt2_124m.sh "$out/qwen05b" \
        lazytrain eager compile || status=1 ;;
    cputest)
      (cd build-gpu && ctest -LE gpu -j "$(nproc)") > "$out/cputest.log" 2>&1 || status=1
      tail -8 "$out/cputest.log" ;;
    fixtures)
      run python3 tools/reference/make_model_fixtures.py "$out/families" 2>&1 | tail -8 ;;
    convert)
      fx=${FIXTURES:-$out/families}
      for f in "$fx"/*/; do
        name=$(basename "$f")
        for dt in f32 bf16; do
          ./build-gpu/lazytrain convert --model "$f" --out "$out/converted/$name-$dt" --dtype "$dt" \
            --max-shard-gb 0.00002 >> "$out/convert.log" 2>&1 || { echo "convert $name $dt failed"; status=1; }
        done
      done
      run python3 tools/reference/check_converted.py "$fx" "$out/converted" "$out/converted.json" ;;
  esac
done
exit $status
