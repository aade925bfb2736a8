#!/usr/bin/env python3
"""Writes tests/data/fixtures/tokenizer_goldens.json with Hugging Face `tokenizers`.

For every text of the corpus below it records the ids each reference
tokenizer gives (add_special_tokens=False) and the text it decodes them back
to. tests/data/tokenizer_golden_test.cpp checks lazytrain against every id.

    python3 -m venv .venv && .venv/bin/pip install tokenizers
    .venv/bin/python tools/reference/make_tokenizer_goldens.py
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tokenizer_reference  # noqa: E402

CORPUS = [
    # Plain English, contractions in every case, and apostrophes that are not.
    "Hello, world! This is a test.",
    "It's, I'm, you're, we've, they'll, he'd, don't",
    "IT'S, I'M, YOU'RE, WE'VE, THEY'LL, HE'D, DON'T, It'S, we'Ll, x'LL 'Re",
    "'s 't 're 've 'm 'll 'd ''s rock'n'roll ’tis O’Neil 'ſ 'ſt",
    "the cat's hat and the dogs' bones; 'quoted' and \"double\"",
    # Digits of many lengths, separators, other number characters.
    "0 12 345 6789 01234 567890 1234567 12345678901234567890",
    "3.14159 -2.5e10 1,000,000 $99.99 50% 1/2 ½ ² Ⅻ ٣٤٥ १२३ 一二三",
    # Whitespace runs: spaces, tabs, trailing spaces, CR LF, exotic spaces.
    "a  b   c    d\t\te\t \tf",
    "trailing spaces   ",
    "   leading spaces",
    "line one\nline two\r\nline three\rline four\n\n\n",
    "  \n  \t\r\n x \n\n y\r\n\r\n\tz  \n",
    "nbsp\u00a0here, ideographic\u3000space, en\u2002quad, nel\u0085x, ls\u2028ps\u2029end",
    "\x0b vertical \x0c form feed \x1c fs \x1f us",
    "",
    " ",
    "\n",
    "\t",
    # Code.
    "def f(x):\n    return x ** 2  # square\n\nprint(f(3))\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "if (a && b || !c) { x->y = z::w<T>(); } // comment /* block */",
    "<html><body class=\"main\">&amp; &lt;tag&gt;</body></html>",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    '{"key": [1, 2.5, null, true], "nested": {"a": "b"}}',
    "~!@#$%^&*()_+`-=[]\\{}|;':\",./<>?",
    "https://example.com/path?q=1&r=two#frag user@example.org",
    # Scripts.
    "你好，世界！这是一个测试。中文没有空格分词。",
    "日本語のテキスト、カタカナとひらがな。漢字も。",
    "한국어 텍스트입니다. 안녕하세요!",
    "مرحبا بالعالم، هذا اختبار. العربية من اليمين إلى اليسار",
    "नमस्ते दुनिया, यह एक परीक्षण है। क्षत्रिय",
    "Привет, мир! Это тест. Ёлка",
    "Γειά σου Κόσμε! ΑΒΓ αβγ",
    "שלום עולם",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่าง",
    "Tiếng Việt có dấu: ả ã ạ ấ ầ ẩ ẫ ậ",
    "ქართული ენა, Հայերեն, አማርኛ",
    # Combining marks and input that NFC changes.
    "cafe\u0301 re\u0301sume\u0301 nai\u0308ve",
    "A\u030a \u212b \u00c5 o\u0308\u0304 q\u0307\u0323 e\u0323\u0302",
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af",
    "\u0915\u093c \u0958 \u09c7\u09be \u0b47\u0b3e \u0dd9\u0dcf",
    "a\u0301\u0301\u0301 \u0344 \u0340\u0341 \u2126 \u212a \u1e9b\u0323",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b",
    "a\u0898\u0334 b\u1df6\u0334 \U00011935\U00011930",
    # Emoji, with joiners, skin tones, flags and keycaps.
    "I ❤️ tokenizers 😀😃😄 👍🏽 🇫🇷🇯🇵",
    "family: 👨‍👩‍👧‍👦 rainbow flag: 🏳️‍🌈 keycap: 1️⃣ #️⃣",
    "🧑🏿‍🚀 astronaut, 👩‍💻 coder, ❤️‍🔥 heart on fire",
    # Special tokens written in the text.
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n",
    "<|endoftext|>",
    "text<|endoftext|>more text <|endoftext|> <|endoftext|><|endoftext|>",
    "<|im_start|><|im_end|><|im_start|",
    "<think>\nreasoning\n</think>\n\nanswer <tool_call>{\"a\":1}</tool_call>",
    "< |im_start|> <|IM_START|> <<|im_end|>> |<|endoftext|>|",
    "<|fim_prefix|>def<|fim_suffix|>return<|fim_middle|>",
    # Long words: many BPE symbols.
    "a" * 300,
    "supercalifragilisticexpialidocious" * 5,
    "x" + "ab" * 100 + "y",
    "9" * 50,
    " " * 100 + "z",
    "\n" * 40,
    "ー" * 60,
    "😀" * 30,
    "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism",
    # A paragraph of ordinary prose.
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many "
    "clips in May. How many clips did Natalia sell altogether in April and May?\n"
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(tokenizer_reference.FIXTURES,
                                                      "tokenizer_goldens.json"))
    args = parser.parse_args()
    import tokenizers

    references = {name: tokenizer_reference.load(name) for name in tokenizer_reference.NAMES}
    cases = []
    for text in CORPUS:
        case = {"text": text}
        for name, tokenizer in references.items():
            ids = tokenizer_reference.encode(tokenizer, text)
            case[name] = {"ids": ids, "decoded": tokenizer_reference.decode(tokenizer, ids)}
        case["pieces"] = {pattern: tokenizer_reference.split_pieces(pattern, text)
                          for pattern in tokenizer_reference.PATTERNS}
        cases.append(case)
    goldens = {
        "made_by": "tools/reference/make_tokenizer_goldens.py",
        "tokenizers_version": tokenizers.__version__,
        "tokenizers": list(tokenizer_reference.NAMES),
        "patterns": tokenizer_reference.PATTERNS,
        "cases": cases,
    }
    # One case per line: reviewable diffs without one id per line.
    header = json.dumps({k: v for k, v in goldens.items() if k != "cases"}, ensure_ascii=True)
    lines = [json.dumps(case, ensure_ascii=True) for case in cases]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(header[:-1] + ', "cases": [\n' + ",\n".join(lines) + "\n]}\n")
    print("wrote %s: %d texts x %d tokenizers" % (args.out, len(cases), len(references)))


if __name__ == "__main__":
    main()
