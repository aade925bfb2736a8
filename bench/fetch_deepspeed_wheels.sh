#!/usr/bin/env bash
# Fetch DeepSpeed 0.19.8 and the Python packages it needs that the GPU machine
# lacks, as wheels for that machine (CPython 3.12, manylinux x86_64), into
# .dswheels/ at the repository root.  Run here, where pip reaches PyPI; the GPU
# machine cannot download anything.  .dswheels is ignored through
# .git/info/exclude and travels with a device call through `carry`.
#
# - PyPI has DeepSpeed only as a source archive: `pip wheel --no-deps` turns it
#   into a pure-Python wheel (no ops prebuilt; CPU Adam is JIT-built on the
#   device, see bench/deepspeed_peers.sh).
# - DeepSpeed's install_requires: einops hjson msgpack ninja numpy packaging
#   psutil py-cpuinfo pydantic>=2 torch tqdm.  All but hjson and pydantic are on
#   the device image (KINDS.md's package list), so only hjson, pydantic and
#   pydantic's own needs (pydantic-core, annotated-types, typing-inspection,
#   typing-extensions) are fetched.  typing-extensions is on the image too, but
#   pydantic 2.12 wants a recent one; the copy here shadows it only inside the
#   DeepSpeed runs' PYTHONPATH.
#
# Usage: bench/fetch_deepspeed_wheels.sh [DIR]   (default: <repo>/.dswheels)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.dswheels}
mkdir -p "$dir"
py=${PYTHON:-python3}

if ! ls "$dir"/deepspeed-0.19.8-*.whl >/dev/null 2>&1; then
  "$py" -m pip wheel -q --no-deps deepspeed==0.19.8 -w "$dir"
fi

plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux1_x86_64)
# Resolve pydantic's needs with pip (one version of each), for cp312.
"$py" -m pip download -q --only-binary=:all: --python-version 3.12 \
  --implementation cp --abi cp312 --abi abi3 --abi none "${plat[@]}" \
  -d "$dir" 'pydantic>=2.0.0,<3' hjson

# Exactly one wheel per distribution, or `pip install` on the device refuses.
dups=$(find "$dir" -maxdepth 1 -name '*.whl' -printf '%f\n' | sed 's/-[0-9].*//' | tr 'A-Z_' 'a-z-' | sort | uniq -d)
if [ -n "$dups" ]; then
  echo "more than one wheel of: $dups (remove the older from $dir)" >&2
  exit 1
fi
ls -l "$dir"
du -sh "$dir"
grep -qx '/.dswheels/' "$root/.git/info/exclude" 2>/dev/null \
  || echo "note: add '/.dswheels/' to .git/info/exclude" >&2
