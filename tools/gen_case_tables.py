#!/usr/bin/env python3
"""Generate src/data/case_tables.cpp: Python's Unicode case mapping.

Chat templates are rendered by transformers with jinja2, so `upper`,
`lower`, `title`, `capitalize` and the str methods of the same names must
map case exactly as the running Python does. The tables are read from
Python's own str methods, one code point at a time, so they hold what
CPython's unicodedata (this interpreter's Unicode version) holds, including
the SpecialCasing.txt mappings to several code points ('ß'.upper() == 'SS').

Two properties decide the context rules, and Python exposes neither
directly, so they are read from its behaviour:
- Cased: str.title() lower-cases a letter after a cased character, so c is
  cased iff (c + 'a').title() ends with 'a'.
- Case_Ignorable: str.lower() maps U+03A3 to final sigma when a cased
  character precedes it and none follows, skipping case-ignorable ones on
  both sides (CPython's handle_capital_sigma), which reveals whether c is
  case-ignorable (see case_ignorable below).

Run from the repository root with the Python whose behaviour to reproduce
(transformers' Python; this one is 3.11, Unicode 14.0):
    python3 tools/gen_case_tables.py
It rewrites src/data/case_tables.cpp; commit the result.
"""
import argparse
import sys
import unicodedata

SIGMA, SMALL_SIGMA, FINAL_SIGMA = "\u03a3", "\u03c3", "\u03c2"


def code_points():
    # Surrogates cannot appear in UTF-8 text and have no case anyway.
    return [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]


def is_cased(c):
    return (c + "a").title().endswith("a")


def is_case_ignorable(c, cased):
    if cased:
        # Alone before a sigma: an ignorable c is skipped and nothing cased
        # is left before it (small sigma); a cased one that is not ignorable
        # makes it final.
        return (c + SIGMA).lower().endswith(SMALL_SIGMA)
    # 'A' before makes the sigma a final candidate; an ignorable c is skipped
    # to the cased 'a' after it (small sigma), a c that is neither ends the
    # word (final sigma).
    return ("A" + SIGMA + c + "a").lower()[1] == SMALL_SIGMA


def mappings(method):
    """{code point: mapped string} where method(chr(cp)) != chr(cp)."""
    out = {}
    for cp in code_points():
        mapped = method(chr(cp))
        if mapped != chr(cp):
            out[cp] = mapped
    return out


def runs_of(single):
    """[first, last, delta, stride] runs over {cp: mapped cp}: each code point
    first, first + stride, ..., last maps to itself + delta, and no mapped code
    point lies between two of a run's (so runs never interleave)."""
    runs = []
    for cp in sorted(single):
        delta = single[cp] - cp
        if runs:
            first, last, run_delta, stride = runs[-1]
            step = cp - last
            fits = stride == step or (first == last and step in (1, 2))
            if run_delta == delta and fits and (step == 1 or last + 1 not in single):
                runs[-1] = [first, cp, delta, step]
                continue
        runs.append([cp, cp, delta, 1])
    return runs


def ranges_of(cps):
    out = []
    for cp in cps:
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def wrap(items, per_line):
    lines = []
    for i in range(0, len(items), per_line):
        lines.append("    " + " ".join(items[i:i + per_line]))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="src/data/case_tables.cpp")
    args = parser.parse_args()

    cased = [cp for cp in code_points() if is_cased(chr(cp))]
    cased_set = set(cased)
    ignorable = [cp for cp in code_points() if is_case_ignorable(chr(cp), cp in cased_set)]
    # The probes must agree with what the Unicode definitions imply: Lu, Ll
    # and Lt are cased; Mn, Me, Cf, Lm and Sk are case-ignorable.
    for cp in code_points():
        category = unicodedata.category(chr(cp))
        if category in ("Lu", "Ll", "Lt") and cp not in cased_set:
            sys.exit("gen_case_tables: U+%04X (%s) not found cased" % (cp, category))
    ignorable_set = set(ignorable)
    for cp in code_points():
        category = unicodedata.category(chr(cp))
        if category in ("Mn", "Me", "Cf", "Lm", "Sk") and cp not in ignorable_set:
            sys.exit("gen_case_tables: U+%04X (%s) not found case-ignorable" % (cp, category))

    expansion_data = []
    tables = []
    for name, method in (("Upper", str.upper), ("Lower", str.lower), ("Title", str.title)):
        mapped = mappings(method)
        # U+03A3's lower mapping depends on its context; the code applies
        # Final_Sigma itself and the table holds the plain mapping.
        single = {cp: ord(s) for cp, s in mapped.items() if len(s) == 1}
        expansions = []
        for cp, s in sorted(mapped.items()):
            if len(s) > 1:
                expansions.append((cp, len(expansion_data), len(s)))
                expansion_data.extend(ord(c) for c in s)
        tables.append((name, runs_of(single), expansions, len(single)))
    assert len(expansion_data) < 65536

    out = []
    out.append("// GENERATED by tools/gen_case_tables.py; do not edit by hand.")
    out.append("// Case mapping as Python %d.%d's str methods do it: Unicode %s." %
               (sys.version_info[0], sys.version_info[1], unicodedata.unidata_version))
    out.append("// clang-format off")
    out.append('#include "data/case_tables.h"')
    out.append("")
    out.append("#include <iterator>")
    out.append("")
    out.append("namespace lt::data::case_tables {")
    out.append("")
    out.append("namespace {")
    out.append("")
    for name, runs, expansions, _ in tables:
        out.append("const CaseRun k%sRuns[] = {" % name)
        out.append(wrap(["{0x%X, 0x%X, %d, %d}," % tuple(r) for r in runs], 4))
        out.append("};")
        out.append("const CaseExpansion k%sExpansions[] = {" % name)
        out.append(wrap(["{0x%X, %d, %d}," % e for e in expansions], 5))
        out.append("};")
        out.append("")
    out.append("}  // namespace")
    out.append("")
    out.append("const char32_t kCaseExpansionData[] = {")
    out.append(wrap(["0x%X," % cp for cp in expansion_data], 10))
    out.append("};")
    out.append("")
    for name, _, _, _ in tables:
        out.append("const CaseMapping k%s = {k%sRuns, std::size(k%sRuns), k%sExpansions,"
                   " std::size(k%sExpansions)};" % ((name,) * 5))
    out.append("")
    for name, cps in (("Cased", cased), ("CaseIgnorable", ignorable)):
        ranges = ranges_of(cps)
        out.append("const CodePointSpan k%sSpans[] = {" % name)
        out.append(wrap(["{0x%X, 0x%X}," % tuple(r) for r in ranges], 5))
        out.append("};")
        out.append("const size_t k%sSpanCount = std::size(k%sSpans);" % (name, name))
        out.append("")
    out.append("}  // namespace lt::data::case_tables")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")
    summary = ", ".join("%s %d code points in %d runs + %d expansions" %
                        (name.lower(), n, len(runs), len(expansions))
                        for name, runs, expansions, n in tables)
    print("wrote %s (Unicode %s): %s; %d cased, %d case-ignorable" %
          (args.out, unicodedata.unidata_version, summary, len(cased), len(ignorable)))


if __name__ == "__main__":
    main()
