"""The Hugging Face `tokenizers` references the C++ tokenizer tests compare with.

Shared by make_tokenizer_goldens.py (committed goldens) and
tokenizer_live_reference.py (the live comparison on random strings).

- "qwen3": tests/data/fixtures/qwen3/tokenizer.json as it is.
- "gpt2": GPT-2's encoder.json + vocab.bpe configured as GPT-2 is: ByteLevel
  pre-tokenization with GPT-2's regex and no prefix space, the ByteLevel
  decoder, and <|endoftext|> as a special token (as GPT-2's tokenizer.json
  and transformers' GPT2Tokenizer have it).
- "llama3_style": the qwen3 file with Llama-3's pre-tokenizer (digits in
  runs of up to three), Llama-3's ignore_merges, and no normalizer.
- "roberta_style": the qwen3 file with RoBERTa's pre-tokenizer (ByteLevel
  with its own regex and a prefix space) and no normalizer.
The two "_style" variants exercise the parts of Llama-3 and RoBERTa files
that differ from Qwen's; tests/data/tokenizer_fixtures.cpp derives the same
files in C++, so keep the two in step.
"""
import json
import os

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data",
                        "fixtures")
NAMES = ("qwen3", "gpt2", "llama3_style", "roberta_style")

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# The pre-tokenizer patterns lazytrain runs as hand-written scanners.
PATTERNS = {
    "gpt2": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    "qwen2": LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}"),
    "llama3": LLAMA3_PATTERN,
}


def split_pieces(pattern_name, text):
    """The pieces HF's Split pre-tokenizer cuts `text` into with a pattern."""
    from tokenizers import Regex, pre_tokenizers

    splitter = pre_tokenizers.Split(Regex(PATTERNS[pattern_name]), "isolated")
    return [piece for piece, _ in splitter.pre_tokenize_str(text)]


def derive_variant(name, qwen3):
    """The tokenizer.json dict of a "_style" variant, from the qwen3 dict."""
    if name == "llama3_style":
        qwen3["normalizer"] = None
        qwen3["pre_tokenizer"] = {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated",
                 "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                 "use_regex": False},
            ],
        }
        qwen3["model"]["ignore_merges"] = True
        return qwen3
    if name == "roberta_style":
        qwen3["normalizer"] = None
        qwen3["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True,
                                  "trim_offsets": True, "use_regex": True}
        return qwen3
    raise ValueError(name)


def load(name, fixtures=FIXTURES):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    if name == "qwen3":
        return Tokenizer.from_file(os.path.join(fixtures, "qwen3", "tokenizer.json"))
    if name == "gpt2":
        bpe = models.BPE.from_file(os.path.join(fixtures, "gpt2", "encoder.json"),
                                   os.path.join(fixtures, "gpt2", "vocab.bpe"))
        tokenizer = Tokenizer(bpe)
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.add_special_tokens(["<|endoftext|>"])
        return tokenizer
    if name.endswith("_style"):
        with open(os.path.join(fixtures, "qwen3", "tokenizer.json"), encoding="utf-8") as f:
            qwen3 = json.load(f)
        return Tokenizer.from_str(json.dumps(derive_variant(name, qwen3)))
    raise ValueError("unknown reference tokenizer %r (known: %s)" % (name, ", ".join(NAMES)))


def encode(tokenizer, text):
    return tokenizer.encode(text, add_special_tokens=False).ids


def decode(tokenizer, ids):
    return tokenizer.decode(ids, skip_special_tokens=False)
