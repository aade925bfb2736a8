#!/usr/bin/env python3
"""Writes the SentencePiece-style tokenizer goldens (and, with --fixtures, the fixtures).

tests/data/fixtures/sentencepiece_goldens.json records, for every text of the
corpus, the ids each variant of sentencepiece_reference gives with Hugging
Face `tokenizers` (add_special_tokens=False) and the text it decodes them
back to, and the same for the `sentencepiece` model; then the decoding of
random id sequences (byte tokens that do and do not make UTF-8, spaces,
special tokens), with and without skip_special_tokens.
tests/data/tokenizer_sentencepiece_test.cpp checks lazytrain against them.

--fixtures first makes the two fixtures, both trained here on TRAINING_TEXT:
a BPE tokenizer.json laid out as Llama 2's (byte fallback, <unk> fused,
<0x00>..<0xFF> in the vocabulary, <s> and </s> special) and a SentencePiece
BPE tokenizer.model with byte fallback.

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers==0.23.3 sentencepiece
    /tmp/tokvenv/bin/python tools/reference/make_sentencepiece_goldens.py [--fixtures]
"""
import argparse
import io
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tokenizer_goldens  # noqa: E402
import sentencepiece_reference as ref  # noqa: E402

# Small on purpose: the fixtures stay a few tens of KB, and characters
# outside this text (CJK, emoji, most accents) need byte fallback.
TRAINING_TEXT = """\
The quick brown fox jumps over the lazy dog. A tokenizer turns text into ids,
and a decoder turns the ids back into the text. Hello world! How are you today?
It's a small vocabulary, so most words are cut into pieces of a few letters.
Natalia sold clips to 48 of her friends in April, and then she sold half as many
clips in May. How many clips did Natalia sell altogether in April and May?
def f(x):
    return x ** 2  # square
for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }
The model reads the training data, computes the loss and updates the weights.
Fine-tuning a language model needs a tokenizer, a chat template and a dataset.
SELECT id, name FROM users WHERE age >= 18 ORDER BY name;
Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 3.14 -2.5 50% $99.99
Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber Stra\u00dfe
"""

# Texts for SentencePiece-style tokenizers beyond the byte-level corpus:
# spaces in every position, the meta symbol and byte tokens written as text,
# the added tokens, and characters that need byte fallback.
EXTRA_CORPUS = [
    "Hello",
    " Hello",
    "  Hello  world  ",
    "Hello world",
    "   ",
    "  ",
    "a b  c   d    e",
    "trailing\n",
    "\nleading newline",
    "tab\tseparated\tvalues",
    "multiple\n\nnewlines\n\n\nhere",
    "\u2581 the meta symbol \u2581\u2581 written \u2581in text\u2581",
    "<0x41> <0xFF> <0x> written as text",
    "<s>Hello</s>",
    "<s> Hello </s>",
    "Hello<s>world</s> again",
    "<unk> as text",
    "[INST] What is 2+2? [/INST] 4</s>",
    "[INST]no spaces[/INST]answer",
    "<|user|>hi there<|user|> and <|user|>",
    " <|user|> x",
    "rare bytes \x01\x02\x7f and \x1b[0m escape",
    "emoji \U0001F600\U0001F44D\U0001F3FD end",
    "CJK \u4f60\u597d\u4e16\u754c and Hangul \ud55c\uad6d\uc5b4",
    "\u00e9\u00e8\u00ea \u00e7a va? na\u00efve caf\u00e9",
    "zero\u200bwidth and nbsp\u00a0here",
    "\u0301 a lone combining mark",
]

# The byte-level corpus's very long words (300 "a"s, ...) stress its merge
# loops; here the prose and code already make segments of hundreds of
# symbols, and leaving them out keeps the goldens small.
CORPUS = [text for text in make_tokenizer_goldens.CORPUS if len(text) <= 200] + EXTRA_CORPUS


def make_fixtures():
    """Trains the two fixtures on TRAINING_TEXT."""
    import sentencepiece
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    byte_tokens = ["<0x%02X>" % b for b in range(256)]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<s>", "</s>"]
                                  + byte_tokens, limit_alphabet=70, show_progress=False)
    tokenizer.train_from_iterator(TRAINING_TEXT.splitlines(), trainer)
    layout = json.loads(tokenizer.to_str())
    # As in Llama 2: the byte tokens are ordinary vocabulary, not added tokens.
    layout["added_tokens"] = [t for t in layout["added_tokens"] if t["content"] not in byte_tokens]
    # Mistral's [INST] markers (special), and a normalized non-special token.
    next_id = len(layout["model"]["vocab"])
    for content, special in (("[INST]", True), ("[/INST]", True), ("<|user|>", False)):
        layout["added_tokens"].append({
            "id": next_id, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": not special, "special": special})
        next_id += 1
    ref.derive("llama2_style", layout)
    os.makedirs(os.path.dirname(ref.BASE_JSON), exist_ok=True)
    with open(ref.BASE_JSON, "w", encoding="utf-8") as f:
        json.dump(layout, f, ensure_ascii=False, separators=(",", ":"))

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(TRAINING_TEXT.splitlines()), model_writer=model, model_type="bpe",
        vocab_size=420, byte_fallback=True, character_coverage=0.98,
        # Llama's models have no normalization rule, and the default's
        # compiled NFKC table would be 240 KB of the 250.
        normalization_rule_name="identity",
        user_defined_symbols=["<|user|>"], minloglevel=2)
    os.makedirs(os.path.dirname(ref.SP_MODEL), exist_ok=True)
    with open(ref.SP_MODEL, "wb") as f:
        f.write(model.getvalue())


def random_id_lists(vocab_size, special_ids, count, seed):
    """Id sequences biased to the decoder's corners: byte tokens (ids 3..258
    in both fixtures), special tokens, and any other id."""
    rng = random.Random(seed)
    lists = []
    for _ in range(count):
        ids = []
        for _ in range(rng.randint(1, 10)):
            kind = rng.random()
            if kind < 0.35:
                ids.append(rng.randint(3, 258))
            elif kind < 0.45:
                ids.append(rng.choice(special_ids))
            else:
                ids.append(rng.randint(0, vocab_size - 1))
        lists.append(ids)
    # A valid multi-byte character and the same bytes cut short.
    lists += [[3 + 0xE4, 3 + 0xBD, 3 + 0xA0], [3 + 0xE4, 3 + 0xBD], [3 + 0xF0, 3 + 0x41]]
    return lists


def hf_goldens():
    tokenizers = {name: ref.load(name) for name in ref.NAMES}
    cases = []
    for text in CORPUS:
        case = {"text": text}
        for name, tokenizer in tokenizers.items():
            ids = tokenizer.encode(text, add_special_tokens=False).ids
            case[name] = {"ids": ids, "decoded": ref.decode(tokenizer, ids, False)}
        cases.append(case)
    base = tokenizers["llama2_style"]
    special_ids = [base.token_to_id(t) for t in ("<unk>", "<s>", "</s>", "[INST]", "<|user|>")]
    decode_cases = []
    for ids in random_id_lists(base.get_vocab_size(), special_ids, 50, seed=28):
        case = {"ids": ids}
        for name, tokenizer in tokenizers.items():
            case[name] = [ref.decode(tokenizer, ids, False),
                          ref.decode(tokenizer, ids, True)]
        decode_cases.append(case)
    return cases, decode_cases


# HF's Split pre-tokenizer on a literal string, each delimiter behaviour.
SPLIT_BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]
SPLIT_TEXTS = ["a b", " a  b ", "  ", "ab", "", "a--b---c-", "-", "x-y"]


def literal_split_goldens():
    from tokenizers import pre_tokenizers

    cases = []
    for delimiter in (" ", "--"):
        for behavior in SPLIT_BEHAVIORS:
            split = pre_tokenizers.Split(delimiter, behavior)
            # As tokenizer.json spells it ("MergedWithPrevious").
            behavior = json.loads(split.__getstate__())["behavior"]
            cases.append({"delimiter": delimiter, "behavior": behavior,
                          "pieces": [[p for p, _ in split.pre_tokenize_str(t)] for t in SPLIT_TEXTS]})
    return {"texts": SPLIT_TEXTS, "cases": cases}


def sentencepiece_goldens():
    sp = ref.load_sentencepiece()
    cases = []
    for text in CORPUS:
        ids = sp.encode(text)
        cases.append({"text": text, "ids": ids, "decoded": sp.decode(ids)})
    special_ids = [sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.piece_to_id("<|user|>")]
    decode_cases = [{"ids": ids, "decoded": sp.decode(ids)}
                    for ids in random_id_lists(sp.get_piece_size(), special_ids, 40, seed=29)]
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    return {"cases": cases, "decode_cases": decode_cases, "pieces": pieces}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixtures", action="store_true", help="remake the fixtures first")
    parser.add_argument("--out", default=os.path.join(ref.FIXTURES, "sentencepiece_goldens.json"))
    args = parser.parse_args()
    import sentencepiece
    import tokenizers

    if args.fixtures:
        # The trainers break ties in an order that varies from run to run, so
        # a remade fixture may differ; the goldens below follow it.
        make_fixtures()
    with open(ref.VARIANTS_JSON, "w", encoding="utf-8") as f:
        json.dump(ref.VARIANTS, f, ensure_ascii=True, indent=1)
        f.write("\n")
    cases, decode_cases = hf_goldens()
    sp = sentencepiece_goldens()
    header = {
        "made_by": "tools/reference/make_sentencepiece_goldens.py",
        "tokenizers_version": tokenizers.__version__,
        "sentencepiece_version": sentencepiece.__version__,
        "variants": list(ref.NAMES),
        "sentencepiece_pieces": sp["pieces"],
        "literal_split": literal_split_goldens(),
    }
    # One case per line: reviewable diffs without one id per line.
    def lines(items):
        return ",\n".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")) for item in items)

    with open(args.out, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, ensure_ascii=True)[:-1])
        f.write(', "cases": [\n' + lines(cases) + "\n],\n")
        f.write('"decode_cases": [\n' + lines(decode_cases) + "\n],\n")
        f.write('"sentencepiece_cases": [\n' + lines(sp["cases"]) + "\n],\n")
        f.write('"sentencepiece_decode_cases": [\n' + lines(sp["decode_cases"]) + "\n]}\n")
    print("wrote %s: %d texts x %d variants, %d decode cases; sentencepiece %d + %d"
          % (args.out, len(cases), len(ref.NAMES), len(decode_cases), len(sp["cases"]),
             len(sp["decode_cases"])))


if __name__ == "__main__":
    main()
