"""The SentencePiece-style references the C++ tokenizer tests compare with.

Shared by make_sentencepiece_goldens.py (committed goldens) and
tokenizer_live_reference.py (the live comparison on random strings).

tests/data/fixtures/llama2_style/tokenizer.json is a small BPE vocabulary
with byte fallback laid out as Llama 2's tokenizer.json is (made by
make_sentencepiece_goldens.py --fixtures). Each variant below replaces some
of its fields, as the conversions of Llama 2, Mistral, Gemma and others
differ; variants.json beside it holds the same replacements, written from
VARIANTS, and tests/data/tokenizer_fixtures.cpp applies them in C++.

tests/data/fixtures/sentencepiece_model/tokenizer.model is a small
SentencePiece BPE model with byte fallback, read with `sentencepiece`.
"""
import json
import os

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data",
                        "fixtures")
BASE_JSON = os.path.join(FIXTURES, "llama2_style", "tokenizer.json")
VARIANTS_JSON = os.path.join(FIXTURES, "llama2_style", "variants.json")
SP_MODEL = os.path.join(FIXTURES, "sentencepiece_model", "tokenizer.model")

SPACE = "\u2581"


def _replace(pattern, content):
    return {"type": "Replace", "pattern": {"String": pattern}, "content": content}


def _metaspace(scheme, split):
    return {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": scheme, "split": split}


# Llama 2's decoder, also Mistral's and most converted SentencePiece models'.
_LLAMA_DECODER = {"type": "Sequence", "decoders": [
    _replace(SPACE, " "), {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}

# Top-level fields replaced whole; "model" holds model fields replaced one by one.
VARIANTS = {
    # transformers' Llama 2 conversion (legacy): the normalizer adds the
    # space and no pre-tokenizer.
    "llama2_style": {
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPACE}, _replace(" ", SPACE)]},
        "pre_tokenizer": None,
        "decoder": _LLAMA_DECODER,
    },
    # The newer conversion (Mistral v0.3, legacy=False): Metaspace adds the
    # space, only at the start of the text.
    "mistral_style": {
        "normalizer": None,
        "pre_tokenizer": _metaspace("first", False),
        "decoder": _LLAMA_DECODER,
    },
    # Metaspace splitting into words, a space before every segment, and the
    # Metaspace decoder after ByteFallback.
    "metaspace_always": {
        "normalizer": None,
        "pre_tokenizer": _metaspace("always", True),
        "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"},
                                                     _metaspace("always", True)]},
    },
    # No space added; a Sequence pre-tokenizer; Strip at the end.
    "metaspace_never": {
        "normalizer": {"type": "Sequence", "normalizers": []},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [_metaspace("never", True)]},
        "decoder": {"type": "Sequence", "decoders": [
            _metaspace("never", True), {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 0, "stop": 1}]},
    },
    # Gemma's conversion: Replace alone, no space added, and a Split on " "
    # that finds none left; unknowns not fused.
    "gemma_style": {
        "normalizer": _replace(" ", SPACE),
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "},
                          "behavior": "MergedWithPrevious", "invert": False},
        "decoder": {"type": "Sequence", "decoders": [
            _replace(SPACE, " "), {"type": "ByteFallback"}, {"type": "Fuse"}]},
        "model": {"fuse_unk": False},
    },
    # No byte fallback: unknown characters become <unk>, runs fused or not.
    "unk_fused": {
        "model": {"byte_fallback": False, "fuse_unk": True},
    },
    "unk_unfused": {
        "model": {"byte_fallback": False, "fuse_unk": False},
    },
}
NAMES = tuple(VARIANTS)


def derive(name, base):
    """The tokenizer.json dict of a variant, from the base dict."""
    variant = VARIANTS[name]
    for key, value in variant.items():
        if key == "model":
            base["model"].update(value)
        else:
            base[key] = value
    return base


def load(name):
    from tokenizers import Tokenizer

    with open(BASE_JSON, encoding="utf-8") as f:
        base = json.load(f)
    return Tokenizer.from_str(json.dumps(derive(name, base)))


def load_sentencepiece():
    import sentencepiece

    return sentencepiece.SentencePieceProcessor(model_file=SP_MODEL)


def decode(tokenizer, ids, skip_special_tokens=False):
    """HF's decoding, or None where it panics: its Strip decoder indexes
    past the start of a token shorter than `stop` (the empty text, here)."""
    try:
        return tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
    except BaseException as error:  # pyo3's PanicException derives from BaseException
        if type(error).__name__ != "PanicException":
            raise
        return None
