#!/usr/bin/env python3
"""Encodes texts with Hugging Face `tokenizers` for the live comparison test.

tests/data/tokenizer_live_test.cpp writes random texts to IN as
{"texts": [...]}, runs this script with the .venv python, and compares
lazytrain's ids with the ones written to OUT:
{"qwen3": [[ids], ...], "qwen3_decoded": [text, ...], "gpt2": ..., "gpt2_decoded": ...,
 "pieces": {"gpt2": [[pieces], ...], "qwen2": ..., "llama3": ...}}, and the same ids and
decoded texts for the SentencePiece-style variants of sentencepiece_reference
("llama2_style", ...).

    .venv/bin/python tools/reference/tokenizer_live_reference.py IN OUT
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sentencepiece_reference  # noqa: E402
import tokenizer_reference  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: tokenizer_live_reference.py IN OUT")
    with open(sys.argv[1], encoding="utf-8") as f:
        texts = json.load(f)["texts"]
    result = {}
    references = [(name, tokenizer_reference.load, tokenizer_reference.decode)
                  for name in tokenizer_reference.NAMES]
    references += [(name, sentencepiece_reference.load, sentencepiece_reference.decode)
                   for name in sentencepiece_reference.NAMES]
    for name, load, decode in references:
        tokenizer = load(name)
        encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
        result[name] = [encoding.ids for encoding in encodings]
        result[name + "_decoded"] = [decode(tokenizer, encoding.ids) for encoding in encodings]
    result["pieces"] = {pattern: [tokenizer_reference.split_pieces(pattern, text) for text in texts]
                        for pattern in tokenizer_reference.PATTERNS}
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
