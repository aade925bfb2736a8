#!/usr/bin/env python3
"""Writes the demo's addition task and its tokenizer (assets/demo/addition/).

The demo (`make demo`, `lazytrain train` with no config) trains a tiny model
from scratch to add two-digit numbers written as word problems, and scores it
on problems it never saw. This script makes, deterministically (fixed seed):

  train.jsonl  one problem for each pair (a, b) with 10 <= a, b <= 99, less
               the held-out pairs;
  test.jsonl   the held-out pairs: no (a, b) of it is in train.jsonl;
  tokenizer/tokenizer.json
               a byte-level BPE tokenizer (Hugging Face format): the 256
               bytes, <|endoftext|>, and merges that make each word of the
               problems one token. Digits are never merged, so every
               question is the same 22 tokens (with the newline the plain
               template adds) and a digit is always the same token.
model/config.json, the model's shape, is written by hand, not by this script.

Rows read as GSM8K's do: {"question": ..., "answer": "#### 57"}, so
`lazytrain eval --task math` extracts the answer after "####".

    python3 scripts/make_demo_data.py [OUT_DIR]   # default assets/demo/addition
"""
import json
import os
import random
import sys

SEED = 23
HELD_OUT = 200
NAMES = ["Ann", "Ben", "Cal", "Dan", "Eve", "Fay", "Gus", "Ida", "Jan", "Kim", "Leo", "Max",
         "Ned", "Pam", "Rex", "Sam", "Tom", "Una", "Val", "Zoe"]
ITEMS = ["apples", "books", "cards", "coins", "eggs", "pens", "shells", "stamps"]


def question(name, a, b, item):
    return f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?"


def answer(a, b):
    return f"#### {a + b}"


def byte_alphabet():
    """GPT-2's map from bytes to printable characters (the ByteLevel alphabet)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) +
                 list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    alphabet, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            alphabet[byte] = chr(byte)
        else:
            alphabet[byte] = chr(256 + extra)
            extra += 1
    return alphabet


def bpe(tokens, merges):
    """Hugging Face's BPE on one word: the adjacent pair of lowest rank
    merges (leftmost first) until no pair does."""
    rank = {pair: i for i, pair in enumerate(merges)}
    tokens = list(tokens)
    while True:
        pairs = [(rank[p], i) for i, p in enumerate(zip(tokens, tokens[1:])) if p in rank]
        if not pairs:
            return tokens
        _, i = min(pairs)
        tokens[i:i + 2] = [tokens[i] + tokens[i + 1]]


def tokenizer_json():
    alphabet = byte_alphabet()
    vocab = {alphabet[byte]: byte for byte in range(256)}
    merges = []
    # Every word as the ByteLevel pre-tokenizer cuts it: with its leading
    # space, a name also without (it starts the question), and "####"
    # (it starts the answer's line).
    words = NAMES + ITEMS + ["has", "and", "gets", "more", "How", "many", "does", "have", "now"]
    pieces = sorted({" " + w for w in words} | set(NAMES) | {"####"})
    for word in pieces:
        tokens = bpe([alphabet[b] for b in word.encode()], merges)
        while len(tokens) > 1:  # merge its first two tokens until it is one
            merges.append((tokens[0], tokens[1]))
            vocab.setdefault(tokens[0] + tokens[1], len(vocab))
            tokens = bpe(tokens, merges)
    eos = len(vocab)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": eos, "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


def write_rows(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "assets", "demo", "addition")
    os.makedirs(os.path.join(out, "tokenizer"), exist_ok=True)
    rng = random.Random(SEED)
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100)]
    rng.shuffle(pairs)

    def row(a, b):
        name, item = rng.choice(NAMES), rng.choice(ITEMS)
        return {"question": question(name, a, b, item), "answer": answer(a, b)}

    write_rows(os.path.join(out, "test.jsonl"), [row(a, b) for a, b in pairs[:HELD_OUT]])
    write_rows(os.path.join(out, "train.jsonl"), [row(a, b) for a, b in pairs[HELD_OUT:]])
    with open(os.path.join(out, "tokenizer", "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
