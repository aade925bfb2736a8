#!/usr/bin/env bash
# llm.c (karpathy/llm.c's train_gpt2cu, bf16, cuDNN attention when its
# frontend headers came along) on GPT-2 124M at batch 64 x 1024, random
# init (`-e d12`), AdamW, clipping 1.0, on GSM8K text in GPT-2 tokens, for
# issue 25's comparison in the same call as lazytrain and PyTorch
# (bench/gpt2_124m.sh runs this as its `llmc` system).
#
# None of llm.c's code is in this repository. Its source is carried to the
# GPU machine untracked, in bench/.llmc-src (ignored by git): made here by
#
#   bench/llmc.sh prepare LLMC_GIT_DIR [CUDNN_FRONTEND_GIT_DIR]
#
# from git directories of github.com/karpathy/llm.c and (for cuDNN
# attention; header-only) github.com/NVIDIA/cudnn-frontend, keeping what
# train_gpt2cu needs (about 1.3 MB, and 3.3 MB of frontend headers). On the
# GPU machine, with build-gpu/lazytrain there (bench/gpu.sh unpack; it
# tokenizes the text):
#
#   bench/llmc.sh OUT_DIR [STEPS]
#
# copies the source to $LLMC_BUILD (default /tmp/lt-llmc), applies the edits
# CUDA 13 needs (sed below), builds train_gpt2cu for sm_90, writes the token
# shard in llm.c's format (a header of 256 int32: magic 20240520, version 1,
# token count; then uint16 tokens), runs STEPS (default 20) steps and prints
# a RESULT line like bench/gpt2_124m.sh's: tokens/s from llm.c's own step
# times (median over the steps after the first 3) and over the wall time of
# those steps. Env: LLMC_BATCH (64), LLMC_CUDNN (1; 0 builds without it).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/bench/.llmc-src

if [ "${1:-}" = prepare ]; then
  llmc_git=${2:?usage: bench/llmc.sh prepare LLMC_GIT_DIR [CUDNN_FRONTEND_GIT_DIR]}
  rm -rf "$src"
  mkdir -p "$src/llm.c"
  # train_gpt2cu's sources only: no dev/ data scripts, docs or CPU versions.
  git --git-dir="$llmc_git" archive HEAD LICENSE Makefile train_gpt2.cu llmc |
    tar -x -C "$src/llm.c" || exit 1
  git --git-dir="$llmc_git" rev-parse HEAD > "$src/llm.c/COMMIT"
  if [ -n "${3:-}" ]; then
    mkdir -p "$src/cudnn-frontend"
    git --git-dir="$3" archive HEAD include LICENSE.txt | tar -x -C "$src/cudnn-frontend" ||
      git --git-dir="$3" archive HEAD include | tar -x -C "$src/cudnn-frontend" || exit 1
    git --git-dir="$3" rev-parse HEAD > "$src/cudnn-frontend/COMMIT"
  fi
  du -sh "$src"
  exit 0
fi

out=${1:?usage: bench/llmc.sh OUT_DIR [STEPS]  (or: bench/llmc.sh prepare LLMC_GIT_DIR ...)}
steps=${2:-20}
batch=${LLMC_BATCH:-64}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -f "$src/llm.c/train_gpt2.cu" ] || {
  echo "llmc: no llm.c source in bench/.llmc-src (run bench/llmc.sh prepare here, carry it)"
  exit 1
}
build=${LLMC_BUILD:-/tmp/lt-llmc}
rm -rf "$build"
mkdir -p "$build"
cp -r "$src/llm.c" "$build/llm.c"
cd "$build/llm.c" || exit 1

# --- the edits CUDA 13 needs (none to llm.c's logic) ---
# CUDA 13's cudaMemAdvise takes a cudaMemLocation, not a device id (llm.c's
# fallback to managed memory when cudaMalloc runs out; not taken at this size).
sed -i 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, cudaMemLocation{cudaMemLocationTypeHost, 0})/' \
  llmc/cuda_utils.cuh
grep -q 'cudaMemLocation{cudaMemLocationTypeHost, 0}' llmc/cuda_utils.cuh ||
  echo "llmc: the cudaMemAdvise edit did not apply (llm.c changed?)"
# NVML's library has no unversioned link name on a machine without the
# driver's development files: point the linker at the versioned one.
mkdir -p "$build/lib"
nvml=$(ldconfig -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 .*x86-64/ {print $NF; exit}')
if [ -n "$nvml" ]; then
  ln -sf "$nvml" "$build/lib/libnvidia-ml.so"
else
  # No NVML at all: llm.c then compiles without it (its mfu.h checks for
  # nvml.h), but the Makefile links -lnvidia-ml anyway; an empty library
  # satisfies that.
  echo | gcc -shared -x c - -o "$build/lib/libnvidia-ml.so"
fi
export LIBRARY_PATH=$build/lib${LIBRARY_PATH:+:$LIBRARY_PATH}

cudnn=${LLMC_CUDNN:-1}
if [ "$cudnn" = 1 ] && [ ! -f "$src/cudnn-frontend/include/cudnn_frontend.h" ]; then
  echo "llmc: cudnn-frontend headers not carried: building without cuDNN attention"
  cudnn=0
fi
# cudnn-frontend 1.x compiles some kernels at run time: it needs NVRTC,
# which llm.c's Makefile (from the frontend 1.5 days) does not link.
make_args=(train_gpt2cu GPU_COMPUTE_CAPABILITY=90 NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN="$cudnn"
           NVCC_LDLIBS=-lnvrtc)
# The Makefile looks for the frontend in ./cudnn-frontend/include.
[ "$cudnn" = 1 ] && ln -s "$src/cudnn-frontend" cudnn-frontend
echo "== llm.c $(cat COMMIT 2>/dev/null | cut -c1-12): make ${make_args[*]}"
start=$(date +%s)
if ! make "${make_args[@]}" > "$out/llmc_build.log" 2>&1; then
  grep -E "error|Error" "$out/llmc_build.log" | head -20
  echo "llmc: build failed (see $out/llmc_build.log)"
  exit 1
fi
echo "   built in $(( $(date +%s) - start )) s (cuDNN attention: $cudnn)"

# --- the token shard: GSM8K question + answer text in GPT-2 tokens ---
# (lazytrain's own GPT-2 tokenizer on the demo's 2,000 GSM8K rows, or the
# full train split when ../shared/data is there; every document starts with
# <|endoftext|>, 50256, as llm.c's shards do.)
lazytrain=$root/build-gpu/lazytrain
[ -x "$lazytrain" ] || lazytrain=$root/build/lazytrain
gsm8k=$root/../shared/data/gsm8k/train.jsonl
[ -f "$gsm8k" ] || gsm8k=$root/assets/demo/gsm8k_train_2000.jsonl
mkdir -p data
python3 - "$gsm8k" "$lazytrain" "$root/assets/demo/tokenizer" data/gsm8k_train.bin <<'PY' || exit 1
import json, struct, subprocess, sys
rows, lazytrain, tokenizer, out = sys.argv[1:5]
docs = [json.loads(l) for l in open(rows)]
# One call encodes every document: they are joined by a separator that the
# byte-level BPE never merges across ("\x00"), then split at its token.
sep = "\x00"
text = sep.join(d["question"] + "\n" + d["answer"] for d in docs)
ids = subprocess.run([lazytrain, "tokenize", "--tokenizer", tokenizer], input=text.encode(),
                     capture_output=True, check=True).stdout.split()
ids = [int(i) for i in ids]
sep_id = int(subprocess.run([lazytrain, "tokenize", "--tokenizer", tokenizer], input=sep.encode(),
                            capture_output=True, check=True).stdout.split()[0])
tokens = [50256] + [50256 if i == sep_id else i for i in ids]
# Each separator must have stayed one token of its own.
assert tokens.count(50256) == len(docs), (tokens.count(50256), len(docs))
assert max(tokens) < 2 ** 16
with open(out, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
    f.write(struct.pack(f"<{len(tokens)}H", *tokens))
print(f"   {len(docs)} documents, {len(tokens)} tokens -> {out}")
PY

# --- the run ---
echo "== llm.c train_gpt2cu (d12 random init, batch $batch x 1024, $steps steps)"
# -v/-m: one validation batch at the first and last step only; -s 0: no
# sampling; -c 0.1, -l 1e-5: weight decay and a constant small rate, as the
# other systems' runs; clipping 1.0 is llm.c's fixed default.
args=(-i data/gsm8k_train.bin -j data/gsm8k_train.bin -e d12 -b "$batch" -t 1024
      -d $((batch * 1024)) -x "$steps" -v 100000 -m 1 -s 0 -l 1e-5 -c 0.1 -u 0 -q 1.0
      -o "$out/llmc_logs")
# Without the lazytrain build's carried libraries: their libstdc++ can be
# older than the one nvcc built train_gpt2cu against on this machine.
env -u LD_LIBRARY_PATH timeout 300 ./train_gpt2cu "${args[@]}" > "$out/llmc.log" 2>&1
rc=$?
grep -E "^step|cuDNN|error|Error" "$out/llmc.log" | head -$((steps + 8))
python3 - "$out/llmc.log" "$batch" <<'PY' | tee -a "$out/summary.txt"
import json, re, statistics, sys
log, batch = sys.argv[1], int(sys.argv[2])
ms = [float(m.group(1)) for m in re.finditer(r"^step\s+\d+/\d+ \|.*\| ([0-9.]+) ms \|", open(log).read(), re.M)]
if len(ms) < 5:
    print("llmc: too few steps (see llmc.log)"); sys.exit(1)
timed = ms[3:]
med = statistics.median(timed) / 1e3
tokens = batch * 1024
print("RESULT " + json.dumps({"system": "llm.c", "steps": len(timed), "median_step_s": round(med, 4),
      "tokens_per_s": round(tokens / med, 1),
      "tokens_per_s_wall": round(tokens * len(timed) / (sum(timed) / 1e3), 1), "peak_gb": 0}))
PY
[ $rc = 0 ] || echo "llmc: train_gpt2cu exited with $rc"
exit $rc
