#!/usr/bin/env python3
"""Writes tests/data/fixtures/bos_goldens.json: the ids transformers'
AutoTokenizer gives for `tokenizer(text)["input_ids"]` (add_special_tokens
left at its default, True) on SentencePiece-style tokenizer folders that
differ in what puts a BOS before the text:

- tokenizer.json's post_processor (none, or TemplateProcessing "<s> $A",
  as Llama 2's and Mistral's files have it);
- tokenizer_config.json's tokenizer_class and add_bos_token;
- a folder with only a SentencePiece tokenizer.model.

The folders are made from the fixtures tests/data/fixtures/llama2_style
(tokenizer.json) and sentencepiece_model (tokenizer.model). Run it once per
transformers version; each run adds its ids under "ids" keyed by the
version, so the file holds both lines of behaviour:

    /tmp/tf4venv/bin/python tools/reference/make_bos_goldens.py   # transformers 4.57.1
    /tmp/tokvenv/bin/python tools/reference/make_bos_goldens.py   # transformers 5.24.0

(each venv: pip install transformers==VERSION sentencepiece protobuf).
tests/data/tokenizer_bos_test.cpp checks lazytrain against the 4.x ids.
"""
import copy
import json
import os
import shutil
import sys
import tempfile

import transformers
from transformers import AutoTokenizer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIXTURES = os.path.join(ROOT, "tests", "data", "fixtures")
OUT = os.path.join(FIXTURES, "bos_goldens.json")

BOS_TEMPLATE = {
    "type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
             {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
}
TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}

# name: (source, post_processor, tokenizer_config.json)
CASES = {
    "json_llama_default": ("json", None, {"tokenizer_class": "LlamaTokenizerFast", **TOKENS}),
    "json_llama_no_bos": ("json", None, {"tokenizer_class": "LlamaTokenizerFast", **TOKENS,
                                         "add_bos_token": False}),
    "json_gemma_default": ("json", None, {"tokenizer_class": "GemmaTokenizerFast", **TOKENS}),
    "json_generic": ("json", None, {"tokenizer_class": "PreTrainedTokenizerFast", **TOKENS}),
    "json_generic_add_bos": ("json", None, {"tokenizer_class": "PreTrainedTokenizerFast", **TOKENS,
                                            "add_bos_token": True}),
    "template_llama_default": ("json", BOS_TEMPLATE, {"tokenizer_class": "LlamaTokenizerFast",
                                                      **TOKENS}),
    "template_llama_no_bos": ("json", BOS_TEMPLATE, {"tokenizer_class": "LlamaTokenizerFast",
                                                     **TOKENS, "add_bos_token": False}),
    "template_generic": ("json", BOS_TEMPLATE, {"tokenizer_class": "PreTrainedTokenizerFast",
                                                **TOKENS}),
    "model_llama_default": ("model", None, {"tokenizer_class": "LlamaTokenizer", **TOKENS}),
    "model_llama_no_bos": ("model", None, {"tokenizer_class": "LlamaTokenizer", **TOKENS,
                                           "add_bos_token": False}),
}
TEXTS = ["Hello world", "  two leading spaces", "The quick brown fox. 48 clips!"]


def make_folder(dir, source, post_processor, config):
    if source == "json":
        with open(os.path.join(FIXTURES, "llama2_style", "tokenizer.json")) as f:
            tok = json.load(f)
        tok["post_processor"] = copy.deepcopy(post_processor)
        with open(os.path.join(dir, "tokenizer.json"), "w") as f:
            json.dump(tok, f)
    else:
        shutil.copy(os.path.join(FIXTURES, "sentencepiece_model", "tokenizer.model"), dir)
    with open(os.path.join(dir, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)


def main():
    goldens = {"cases": []}
    if os.path.exists(OUT):
        with open(OUT) as f:
            goldens = json.load(f)
    by_name = {c["name"]: c for c in goldens["cases"]}
    version = transformers.__version__
    for name, (source, post_processor, config) in CASES.items():
        case = by_name.setdefault(name, {"name": name, "source": source,
                                         "post_processor": post_processor, "config": config,
                                         "texts": TEXTS, "ids": {}})
        with tempfile.TemporaryDirectory() as dir:
            make_folder(dir, source, post_processor, config)
            tokenizer = AutoTokenizer.from_pretrained(dir)
            case["ids"][version] = [tokenizer(t)["input_ids"] for t in TEXTS]
            print(name, version, type(tokenizer).__name__, case["ids"][version][0], file=sys.stderr)
    goldens["cases"] = list(by_name.values())
    goldens["note"] = ("tokenizer(text)['input_ids'] by transformers version; "
                       "made by tools/reference/make_bos_goldens.py")
    with open(OUT, "w") as f:
        json.dump(goldens, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
