#!/usr/bin/env bash
# Packs a local CUDA build (lazytrain, test_gpu) and the shared libraries
# they link beyond glibc and CUDA into build-carry/ (about 10 MB, under the
# device tool's 64 MiB carry limit with .devdeps), so a device call can skip
# its ~3-minute build: `bench/gpu.sh OUT unpack gputest ...` with carry
# [".devdeps", "build-carry"]. The tests find the sources and binaries by
# the paths compiled in (LT_SOURCE_DIR, LT_BINARY_DIR); unpack links those
# paths to the device's checkout when they differ.
# Usage: bench/pack_gpu_build.sh BUILD_DIR   (configured with -DLT_CUDA=ON
#        -DCMAKE_CUDA_ARCHITECTURES=90, Release)
# Env: LT_CARRY_DIR packs into another folder than build-carry (for several
#      people sharing one tree; bench/gpu.sh's unpack reads the same variable).
set -euo pipefail
build=$(cd "${1:?usage: bench/pack_gpu_build.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
carry=${LT_CARRY_DIR:-build-carry}
cmake --build "$build" --target lazytrain test_gpu
rm -rf "$carry" && mkdir -p "$carry"/stage/lib
# Without debug information (symbols kept for backtraces): a quarter of the size.
mkdir -p "$carry"/stage/bin
for bin in lazytrain test_gpu; do
  strip --strip-debug -o "$carry/stage/bin/$bin" "$build/$bin"
done
tar -C "$carry"/stage/bin -cf - lazytrain test_gpu | xz -T0 -3 > "$carry"/bins.tar.xz
# Everything ldd resolves under /lib or /usr/lib except the C runtime, which
# the device has: yaml-cpp, fmt, spdlog, CBC, liburing, libstdc++ (not OpenBLAS: below).
ldd "$build/lazytrain" "$build/test_gpu" | awk '$3 ~ /^\/(usr\/)?lib/ {print $3}' | sort -u |
  while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;;
      # The device's own driver and CUDA libraries must be the ones loaded.
      libcuda.so*|libnvidia*|libcudart*|libcublas*|libcudnn*|libnccl*) ;;
      # The device has OpenBLAS (../shared/DEVICE.md); packed, it alone took
      # the carry past 64 MiB.
      libopenblas*|liblapack*|libblas*|libgfortran*) ;;
      *) cp -L "$lib" "$carry/stage/lib/" ;;
    esac
  done
tar -C "$carry"/stage -cf - lib | xz -T0 -3 > "$carry"/libs.tar.xz
rm -rf "$carry"/stage
printf '%s\n%s\n' "$root" "$build" > "$carry"/paths.txt
git rev-parse HEAD > "$carry"/commit.txt
git status --short --untracked-files=no > "$carry"/dirty.txt
du -sh "$carry"
