#!/usr/bin/env python3
"""Encodes texts with Hugging Face `tokenizers` for the live comparison test.

tests/data/tokenizer_live_test.cpp writes random texts to IN as
{"texts": [...]}, runs this script with the .venv python, and compares
lazytrain's ids with the ones written to OUT:
{"qwen3": [[ids], ...], "qwen3_decoded": [text, ...], "gpt2": ..., "gpt2_decoded": ...,
 "pieces": {"gpt2": [[pieces], ...], "qwen2": ..., "llama3": ...}}.

    .venv/bin/python tools/reference/tokenizer_live_reference.py IN OUT
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_reference  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: tokenizer_live_reference.py IN OUT")
    with open(sys.argv[1], encoding="utf-8") as f:
        texts = json.load(f)["texts"]
    result = {}
    for name in tokenizer_reference.NAMES:
        tokenizer = tokenizer_reference.load(name)
        encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
        result[name] = [encoding.ids for encoding in encodings]
        result[name + "_decoded"] = [tokenizer_reference.decode(tokenizer, encoding.ids)
                                     for encoding in encodings]
    result["pieces"] = {pattern: [tokenizer_reference.split_pieces(pattern, text) for text in texts]
                        for pattern in tokenizer_reference.PATTERNS}
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
