#!/usr/bin/env bash
# Issue 25's benchmark on the GPU machine, in one call: `lazytrain train`
# on GPT-2 124M (bench/models/gpt2-124m, random init, batch 64 x 1024 in one
# micro-batch, AdamW, clipping 1.0, resident bf16), then PyTorch eager and
# torch.compile on the same model (tools/reference/torch_baseline.py), then lazytrain's
# per-op-class profile of one step (LT_OP_PROFILE=1, ResidentBench with
# this config). Prints tokens/s over the wall time of the timed steps and
# the median step for each.
# Needs build-gpu (bench/gpu.sh build or unpack).
# Usage: bench/gpt2_124m.sh OUT_DIR [runs...]
#   runs: lazytrain eager compile llmc profile profile_unfused (default: all but the last;
#   llmc needs llm.c's source carried in bench/.llmc-src, see bench/llmc.sh, and is
#   skipped with a note without it)
# Env: LT_BENCH_MODEL (a bench/models folder, default gpt2-124m),
#      LT_BENCH_BATCH (sequences of 1024 a step, default 64),
#      LT_BENCH_GRAD_ACCUM (lazytrain's micro-batches per step, default 1).
set -uo pipefail
# The fused head and the one-pass LayerNorm backward are the defaults (LT_LM_HEAD=unfused,
# LT_LAYER_NORM_BACKWARD=two_pass restore the earlier kernels).
out=${1:?usage: bench/gpt2_124m.sh OUT_DIR [runs...]}
shift
runs=${*:-lazytrain eager compile llmc profile}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
[ -d .devdeps ] && export LD_LIBRARY_PATH=$PWD/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
model=${LT_BENCH_MODEL:-gpt2-124m}
config=bench/models/$model/config.json
vocab=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$config")
batch=${LT_BENCH_BATCH:-64}
steps=12  # metrics lines to wait for; the first 2 are warm-up
status=0
for run in $runs; do
  case $run in
    lazytrain)
      python3 - "$out/data.jsonl" "$vocab" "$batch" <<'PY'
import json, random, sys
random.seed(0)
vocab = int(sys.argv[2])
with open(sys.argv[1], "w") as f:
    for _ in range(int(sys.argv[3]) * 14):
        ids = [random.randrange(vocab) for _ in range(1024)]
        f.write(json.dumps({"input_ids": ids, "labels": ids}) + "\n")
PY
      cat > "$out/lazytrain.yaml" <<YAML
model:
  path: $root/bench/models/$model
  init: random
data:
  path: $out/data.jsonl
  format: tokens
train:
  steps: 1000
  batch_size: $batch
  grad_accum: ${LT_BENCH_GRAD_ACCUM:-1}
  seq_len: 1024
  grad_clip: 1.0
  save_every: 0
optim:
  name: adamw
  lr: 1.0e-5
exec:
  mode: resident
out:
  dir: $out/lazytrain
YAML
      echo "== lazytrain train ($model, resident, batch $batch x 1024)"
      # Tokens/s over the wall time of steps 3.. (bench/watch_train.py).
      python3 bench/watch_train.py ./build-gpu/lazytrain "$out/lazytrain.yaml" "$out/lazytrain" \
        "$out/lazytrain.log" "$steps" 200 '{"system": "lazytrain"}' | tee -a "$out/summary.txt" ||
        status=1
      grep -E "^(executor|device|plan:|weights)|rror" "$out/lazytrain.log" | head -8
      ;;
    eager|compile)
      flag=(); [ "$run" = compile ] && flag=(--compile)
      echo "== pytorch $run"
      timeout 300 python3 tools/reference/torch_baseline.py "$config" --batch "$batch" --seq 1024 \
        --steps 10 --warmup 3 "${flag[@]}" \
        > "$out/torch_$run.log" 2>&1 || status=1
      grep -E "RESULT|rror" "$out/torch_$run.log" | tail -3 | tee -a "$out/summary.txt" ;;
    llmc)
      # karpathy/llm.c's train_gpt2cu, built here from the carried source (bench/llmc.sh).
      if [ -f bench/.llmc-src/llm.c/train_gpt2.cu ]; then
        LLMC_BATCH=$batch bash bench/llmc.sh "$out/llmc" 20 | tee "$out/llmc.txt" || status=1
        grep '^RESULT' "$out/llmc.txt" >> "$out/summary.txt"
      else
        echo "== llm.c: skipped (no bench/.llmc-src; see bench/llmc.sh prepare)"
      fi ;;
    profile|profile_unfused)
      # profile_unfused: the same with LT_LM_HEAD=unfused (the head as before the fused classifier).
      head=fused; [ "$run" = profile_unfused ] && head=unfused
      echo "== lazytrain profile, $head head (LT_OP_PROFILE=1, ResidentBench on $config, one step after the timed ones)"
      LT_LM_HEAD=$head LT_BENCH=1 LT_OP_PROFILE=1 LT_BENCH_STEPS=3 LT_BENCH_BATCH=$batch LT_BENCH_CONFIG="$config" \
        timeout 200 ./build-gpu/test_gpu --gtest_filter='ResidentBench.*' > "$out/$run.log" 2>&1 || status=1
      grep -E "^step|RESULT|PROFILE|FAILED|rror" "$out/$run.log" | sed 's/^PROFILE //' ;;
  esac
done
[ -f "$out/summary.txt" ] && python3 - "$out/summary.txt" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("RESULT "):
        r = json.loads(line[7:]); rows[r["system"]] = r
print("\n| system | tokens/s over wall | median step s | tokens/s at median | GPU peak GB |")
print("| --- | --- | --- | --- | --- |")
for name, r in rows.items():
    print(f"| {name} | {r['tokens_per_s_wall']:.0f} | {r['median_step_s']:.4f} | {r['tokens_per_s']:.0f} | {r['peak_gb']:.1f} |")
if "lazytrain" in rows and "pytorch-compile" in rows:
    print(f"\nlazytrain / torch.compile: {rows['lazytrain']['tokens_per_s_wall'] / rows['pytorch-compile']['tokens_per_s_wall']:.3f}")
if "lazytrain" in rows and "llm.c" in rows:
    # llm.c's "over wall" is over its own per-step times (it reports no stamps between steps).
    print(f"lazytrain / llm.c at the median step: {rows['lazytrain']['tokens_per_s'] / rows['llm.c']['tokens_per_s']:.3f}")
PY
exit $status
