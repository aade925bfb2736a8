#!/usr/bin/env bash
# Install, with apt, the Debian packages lazytrain builds against, but only
# those that are missing. Idempotent: when everything is present it changes
# nothing and never touches the network.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libopenblas-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev
  libfmt-dev libspdlog-dev libsentencepiece-dev
  coinor-libcbc-dev liburing-dev libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
  gnuplot-nox python3-venv
)
# The fusion compiler (src/compile, issue 24) builds on MLIR 19: about 185 MB
# to download and 1.4 GB installed. LT_MLIR=OFF leaves it out, matching a
# build configured with -DLT_MLIR=OFF.
if [ "${LT_MLIR:-ON}" != "OFF" ]; then
  packages+=(libmlir-19-dev mlir-19-tools llvm-19-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg -s "$p" >/dev/null 2>&1; then missing+=("$p"); fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
