#!/usr/bin/env bash
# `lazytrain plan` for the 27B-class config of issue 8 (hidden 5120, 64
# layers, FFN 17408, 24 query / 4 KV heads of 256, vocabulary 151936,
# untied) against the LazyTrain paper's H800 profile (bench/plan_h800.yaml),
# at the paper's batch 72 x 1024. Two runs:
#   1. the profile as it is: the GPU activation room is what lazytrain's
#      own memory budget leaves of the 70 GB;
#   2. the paper's instance: the GPU activation budget fixed at its
#      21.55 GiB (23.14 GB).
# Usage: bench/plan_27b.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/config.json" <<'JSON'
{"model_type": "qwen3", "hidden_size": 5120, "num_hidden_layers": 64,
 "intermediate_size": 17408, "num_attention_heads": 24, "num_key_value_heads": 4,
 "head_dim": 256, "vocab_size": 151936, "tie_word_embeddings": false,
 "max_position_embeddings": 40960}
JSON
cp "$root/bench/plan_h800.yaml" "$work/h800.yaml"
{ cat "$root/bench/plan_h800.yaml"; echo "gpu_activation_gb: 23.14"; } > "$work/h800_paper.yaml"
for hw in h800 h800_paper; do
  echo "== $hw"
  start=$(date +%s%N)
  "$build/lazytrain" plan --model "$work/config.json" --hardware "$work/$hw.yaml" \
    --batch-size 72 --seq-len 1024 --time-limit 60 "${@:2}"
  end=$(date +%s%N)
  echo "wall: $(( (end - start) / 1000000 )) ms"
done
