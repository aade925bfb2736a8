#!/usr/bin/env python3
"""Writes tests/data/fixtures/jinja_case_goldens.json with jinja2.

The case-mapping filters (upper, lower, title, capitalize) and str methods
(.upper(), .lower(), .title(), .capitalize()) rendered over strings from
many scripts, as transformers' apply_chat_template renders them
(ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks). The
Python running this decides the Unicode version; tests/data/jinja_case_test.cpp
checks that lazytrain's renderer gives the same text.

    python3 -m venv /tmp/venv-case && /tmp/venv-case/bin/pip install jinja2==3.1.6
    /tmp/venv-case/bin/python tools/reference/make_jinja_case_goldens.py
"""
import json
import os
import sys
import unicodedata

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "fixtures",
                   "jinja_case_goldens.json")

# Each is rendered with the case's string as `s`.
EXPRESSIONS = [
    "{{ s|upper }}", "{{ s|lower }}", "{{ s|title }}", "{{ s|capitalize }}",
    "{{ s.upper() }}", "{{ s.lower() }}", "{{ s.title() }}", "{{ s.capitalize() }}",
]

# (name, s): all valid UTF-8 (Python strings cannot hold invalid bytes; the
# unit test covers those).
STRINGS = [
    ("ascii", "hello WORLD, it's o'neil-smith (x{y[z<w) 3rd x1y"),
    ("latin1_accents", "\u00e7a va? \u00c9l\u00e8ve \u00e0 l'\u00e9cole: na\u00efve fa\u00e7ade "
     "\u00ff \u0178 \u00b5 \u00c0\u00c9\u00ce\u00d5\u00dc \u00f0\u00fe \u00d0\u00de"),
    ("sharp_s", "stra\u00dfe STRASSE \u00df \u1e9e gro\u00df \u00dfa"),
    ("turkish_dotted_and_dotless_i", "\u0130stanbul \u0131i \u0130I D\u0130YARBAKIR \u0131sparta "
     "\u0130"),
    ("greek_final_sigma", "\u039f\u0394\u039f\u03a3 \u039f\u0394\u039f\u03a3. \u03a3 "
     "\u03a3\u0391\u03a3 \u0391\u03a3, \u03a3' \u0391\u03a3.\u0391 \u038c\u03a3\u039f\u03a3 "
     "\u03cc\u03c3\u03bf\u03c2"),
    ("greek_sigma_alone", "\u03a3"),
    ("greek_sigma_after_a_cased_letter", "\u0391\u03a3"),
    ("greek_sigma_around_case_ignorables", "\u0391\u03a3\u0301 \u0391\u0301\u03a3 "
     "\u0391\u03a3\u0301\u0391 \u0391'\u03a3 '\u03a3 \u0391\u03a3\u00ad"),
    ("greek_expansions", "\u0390 \u03b0 \u1fb3 \u1fbc \u1ff3 \u1f80 \u1f88 \u0345 \u1fb6"),
    ("digraphs", "\u01c6ungla \u01c5 \u01c4 \u01c9 \u01c8 \u01c7 \u01cc \u01cb \u01ca \u01f3 "
     "\u01f2 \u01f1 \u01c4A \u01c6a"),
    ("cyrillic", "\u043f\u0440\u0438\u0432\u0435\u0442 \u041c\u0418\u0420 \u0451\u0436 "
     "\u0401\u043b\u043a\u0430 \u0463 \u1c80"),
    ("ligatures_latin_and_armenian", "\ufb01ne \ufb02ow \ufb00 \ufb03 \u0587 \u0535\u0582 "
     "\ufb13 \u0561\u0580\u0587"),
    ("cherokee", "\u13a0\uab70 \u13f8 \u13f0 \uabb3\uabb3 \u13a0\u13a1"),
    ("georgian", "\u10e5\u10d0\u10e0\u10d7\u10e3\u10da\u10d8 \u1c90\u1c91 \u10a0"),
    ("mixed_scripts_digits_punctuation", "abc123 \u00c0B-c(d{e[f<g h_i 'x' \u201cquoted\u201d "
     "x2y \u03a9mega \u2177 \u24d0 \u0149 \u1e96 \uff41\uff22"),
    ("supplementary_planes", "\U00010428\U00010429 \U00010400 \U0001e922 \U0001e900 "
     "\U000118c0 \U00016e60"),
    ("cjk_unchanged", "\u4f60\u597d\uff0c\u4e16\u754c\u3002\u65e5\u672c\u8a9e\u306e"
     "\u30c6\u30ad\u30b9\u30c8 \ud55c\uad6d\uc5b4"),
    ("emoji_and_joiners", "hello \U0001f44b WORLD \U0001f30d e\u0301 "
     "\U0001f469\u200d\U0001f4bb x \U0001f1eb\U0001f1f7"),
    ("python_whitespace_in_jinja_title", "a\u3000b\u2028c\u00a0d\u0085e\u001cf\tg\u2009h"),
    ("empty", ""),
]


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    cases = []
    for name, s in STRINGS:
        texts = {e: env.from_string(e).render(s=s) for e in EXPRESSIONS}
        cases.append({"name": name, "s": s, "texts": texts})
    header = {
        "made_by": "tools/reference/make_jinja_case_goldens.py",
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "unicode_version": unicodedata.unidata_version,
        "jinja2_version": jinja2.__version__,
    }
    head = json.dumps(header, ensure_ascii=True)
    lines = [json.dumps(case, ensure_ascii=True) for case in cases]
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(head[:-1] + ', "cases": [\n' + ",\n".join(lines) + "\n]}\n")
    print("wrote %s: %d strings x %d expressions" % (os.path.normpath(OUT), len(cases),
                                                      len(EXPRESSIONS)))


if __name__ == "__main__":
    main()
