#!/usr/bin/env python3
"""Times Hugging Face `tokenizers` encoding for bench/tokenizer_bench.sh.

Same protocol as `lazytrain tokenize --bench`: DOCS is JSONL, one JSON
string per line; each document is encoded on its own
(Tokenizer.encode, add_special_tokens=False; no encode_batch), one warm-up
pass, then ROUNDS timed passes. Run with RAYON_NUM_THREADS=1 for one
thread. Prints one JSON line: documents, bytes, tokens, seconds per pass,
and batch_seconds: the same passes through encode_batch (on one thread it
shows HF's Rust-side speed without Python's per-call overhead; for
information, not the comparison).

    tokenizer_bench_reference.py NAME DOCS ROUNDS    (NAME: qwen3 or gpt2)
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_reference  # noqa: E402


def main():
    name, docs_path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tokenizer = tokenizer_reference.load(name)
    with open(docs_path, encoding="utf-8") as f:
        documents = [json.loads(line) for line in f if line.strip()]
    tokens = sum(len(tokenizer.encode(d, add_special_tokens=False).ids) for d in documents)
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        for document in documents:
            tokenizer.encode(document, add_special_tokens=False)
        seconds.append(time.perf_counter() - start)
    batch_seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        tokenizer.encode_batch(documents, add_special_tokens=False)
        batch_seconds.append(time.perf_counter() - start)
    print(json.dumps({"documents": len(documents), "bytes": sum(len(d.encode()) for d in documents),
                      "tokens": tokens, "seconds": seconds, "batch_seconds": batch_seconds}))


if __name__ == "__main__":
    main()
