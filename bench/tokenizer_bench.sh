#!/usr/bin/env bash
# Single-thread encode throughput, lazytrain vs Hugging Face `tokenizers`, on
# the same documents in the same run: GSM8K train questions + answers, each
# "question\nanswer" encoded on its own. Each side makes one warm-up pass
# (filling its word cache) and ROUNDS timed passes; the median pass gives
# MB/s (10^6 bytes of UTF-8 input per second).
#
#   bench/tokenizer_bench.sh [BUILD_DIR] [ROUNDS]
#
# Needs BUILD_DIR/lazytrain and .venv with `tokenizers` (pip install tokenizers).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
ROUNDS=${2:-7}
PYTHON=.venv/bin/python
GSM8K=${GSM8K:-../shared/data/gsm8k/train.jsonl}
[ -f "$GSM8K" ] || GSM8K=/work/shared/data/gsm8k/train.jsonl

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -c '
import json, sys
with open(sys.argv[1]) as f, open(sys.argv[2], "w") as out:
    for line in f:
        row = json.loads(line)
        out.write(json.dumps(row["question"] + "\n" + row["answer"]) + "\n")
' "$GSM8K" "$work/docs.jsonl"

export RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=1
for name in qwen3 gpt2; do
  "$BUILD_DIR/lazytrain" tokenize --tokenizer "tests/data/fixtures/$name" \
    --bench "$work/docs.jsonl" --bench-rounds "$ROUNDS" > "$work/lt.json"
  "$PYTHON" tools/reference/tokenizer_bench_reference.py "$name" "$work/docs.jsonl" "$ROUNDS" \
    > "$work/hf.json"
  "$PYTHON" - "$name" "$work/lt.json" "$work/hf.json" <<'PY'
import json, statistics, sys
name, lt, hf = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
assert lt["bytes"] == hf["bytes"], "the two sides read different text"
if lt["tokens"] != hf["tokens"]:
    print("WARNING: token counts differ: lazytrain %d, HF %d" % (lt["tokens"], hf["tokens"]))
mbps = lambda seconds: lt["bytes"] / statistics.median(seconds) / 1e6
print("%-6s %d docs, %.2f MB, %d tokens: lazytrain %.1f MB/s, HF tokenizers %.1f MB/s, ratio %.2fx "
      "(HF encode_batch on 1 thread: %.1f MB/s)"
      % (name, lt["documents"], lt["bytes"] / 1e6, lt["tokens"], mbps(lt["seconds"]),
         mbps(hf["seconds"]), mbps(lt["seconds"]) / mbps(hf["seconds"]), mbps(hf["batch_seconds"])))
PY
done
