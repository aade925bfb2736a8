#!/usr/bin/env python3
"""Goldens for tests/data/word_chars_test.cpp's overlap case: Hugging Face
tokenizers finds added tokens in the raw text first and strips around them
after, so a token that starts inside another's stripped whitespace is still
emitted (its text counted twice). The llama2_style fixture plus four added
tokens; the ids HF gives for texts where strips and matches meet.

Run from the repository root with a venv holding `tokenizers`:
    .venv/bin/python tools/reference/make_added_token_overlap_goldens.py
"""
import json

import tokenizers
from tokenizers import Tokenizer

FIXTURE = "tests/data/fixtures/llama2_style/tokenizer.json"
GOLDENS = "tests/data/fixtures/added_token_overlap_goldens.json"
ADDED = [  # content, lstrip, rstrip, special
    ("<R>", False, True, True),
    ("<L>", True, False, True),
    (" x", False, False, False),
    ("\n\n", False, False, False),
]
TEXTS = ["<R> x", "<R>\n\n", "<R>\n\n\nz", "<R>  x y", "a <R> x<L>", "<R> \n\n <L>b",
         "q\n\n <L>", "<R>\n\n<L>", " x<R> x x", "<R> <R> x", "<R>", "x <L> x"]


def main():
    layout = json.load(open(FIXTURE, encoding="utf-8"))
    next_id = max(max(layout["model"]["vocab"].values()),
                  max(t["id"] for t in layout["added_tokens"])) + 1
    added = []
    for content, lstrip, rstrip, special in ADDED:
        added.append({"id": next_id, "content": content, "single_word": False, "lstrip": lstrip,
                      "rstrip": rstrip, "normalized": False, "special": special})
        next_id += 1
    layout["added_tokens"] += added
    tok = Tokenizer.from_str(json.dumps(layout))
    cases = [[t, tok.encode(t, add_special_tokens=False).ids] for t in TEXTS]
    with open(GOLDENS, "w", encoding="utf-8") as f:
        json.dump({"tokenizers": tokenizers.__version__, "fixture": FIXTURE,
                   "added_tokens": added, "cases": cases}, f, ensure_ascii=True, indent=1)
        f.write("\n")
    for t, ids in cases:
        print(repr(t), ids)


if __name__ == "__main__":
    main()
