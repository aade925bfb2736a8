#!/usr/bin/env python3
"""Generate src/data/unicode_tables.cpp: the Unicode data the tokenizer needs.

The tokenizer must give the same ids as Hugging Face `tokenizers`, so the
tables reproduce the Unicode data *that library* uses, which is two versions
at once:

- Character classes (\\p{L}, \\p{N}, \\s) for the pre-tokenizer patterns come
  from its regex engine (Oniguruma), which knows Unicode 16.0. We read them
  from the `unicodedata2` package pinned to 16.0.0
  (`pip install unicodedata2==16.0.0`).
- NFC comes from the `unicode-normalization-alignments` crate, whose data is
  Unicode 9.0: marks assigned later are starters (ccc 0) to it, and later
  compositions (U+11938) do not happen. We read that data from a Python 3.6
  interpreter, whose `unicodedata` is Unicode 9.0 (`--unicode9-python`).

Run from the repository root:
    .venv/bin/python tools/gen_unicode_tables.py [--unicode9-python PATH]
It rewrites src/data/unicode_tables.cpp; commit the result.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

CATEGORY_VERSION = "16.0.0"
NORMALIZATION_VERSION = "9.0.0"

# Must match lt::data::CharClass in src/data/unicode.h.
CLASS_OTHER, CLASS_LETTER, CLASS_NUMBER, CLASS_SPACE = 0, 1, 2, 3

# Runs under the Unicode 9.0 interpreter; prints the normalization data as JSON.
NORMALIZATION_DUMP = r"""
import json, sys, unicodedata
out = {"version": unicodedata.unidata_version, "ccc": [], "decomp": [], "primary": [], "nfc_no": []}
for cp in range(0x110000):
    if 0xD800 <= cp < 0xE000:
        continue
    ch = chr(cp)
    ccc = unicodedata.combining(ch)
    if ccc:
        out["ccc"].append([cp, ccc])
    d = unicodedata.decomposition(ch)
    if not d or d.startswith("<"):
        continue
    out["decomp"].append([cp, unicodedata.normalize("NFD", ch)])
    parts = [int(x, 16) for x in d.split()]
    # A primary composite is a two-part canonical decomposition that NFC
    # recomposes; exclusions and non-starter decompositions stay apart.
    if len(parts) == 2 and unicodedata.normalize("NFC", chr(parts[0]) + chr(parts[1])) == ch:
        out["primary"].append([parts[0], parts[1], cp])
    if unicodedata.normalize("NFC", ch) != ch:
        out["nfc_no"].append(cp)
json.dump(out, sys.stdout)
"""


def find_unicode9_python(explicit):
    if explicit:
        return explicit
    # pyenv's shim for python3.6 fails unless 3.6 is selected, so look in
    # pyenv's versions folder before PATH.
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.6*/bin/python3.6")))
    if candidates:
        return candidates[-1]
    found = shutil.which("python3.6")
    if found:
        return found
    sys.exit("gen_unicode_tables: need a Python 3.6 interpreter (Unicode 9.0); pass --unicode9-python")


def char_class(ud, cp):
    if cp in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x85):
        return CLASS_SPACE
    cat = ud.category(chr(cp))
    # Oniguruma's \s: U+0009-000D, U+0085 and the separators Zs, Zl, Zp.
    if cat in ("Zs", "Zl", "Zp"):
        return CLASS_SPACE
    if cat[0] == "L":
        return CLASS_LETTER
    if cat[0] == "N":
        return CLASS_NUMBER
    return CLASS_OTHER


def ranges_of(values):
    """[(first, last, value)] for runs of equal nonzero values over code points."""
    out = []
    for cp, value in values:
        if value == 0:
            continue
        if out and out[-1][1] == cp - 1 and out[-1][2] == value:
            out[-1][1] = cp
        else:
            out.append([cp, cp, value])
    return out


def wrap(items, per_line):
    lines = []
    for i in range(0, len(items), per_line):
        lines.append("    " + " ".join(items[i:i + per_line]))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unicode9-python", help="a Python whose unicodedata is Unicode 9.0")
    parser.add_argument("--out", default="src/data/unicode_tables.cpp")
    args = parser.parse_args()

    try:
        import unicodedata2 as ud
    except ImportError:
        sys.exit("gen_unicode_tables: pip install unicodedata2==%s" % CATEGORY_VERSION)
    if ud.unidata_version != CATEGORY_VERSION:
        sys.exit("gen_unicode_tables: unicodedata2 is Unicode %s, need %s" %
                 (ud.unidata_version, CATEGORY_VERSION))

    py9 = find_unicode9_python(args.unicode9_python)
    norm = json.loads(subprocess.check_output([py9, "-c", NORMALIZATION_DUMP]))
    if norm["version"] != NORMALIZATION_VERSION:
        sys.exit("gen_unicode_tables: %s has Unicode %s, need %s" %
                 (py9, norm["version"], NORMALIZATION_VERSION))

    all_cps = [cp for cp in range(0x110000) if not (0xD800 <= cp < 0xE000)]
    class_ranges = ranges_of((cp, char_class(ud, cp)) for cp in all_cps)
    ccc_ranges = ranges_of((cp, ccc) for cp, ccc in norm["ccc"])

    decomp_entries = []
    decomp_data = []
    for cp, nfd in norm["decomp"]:
        cps = [ord(c) for c in nfd]
        decomp_entries.append((cp, len(decomp_data), len(cps)))
        decomp_data.extend(cps)
    assert len(decomp_data) < 65536 and max(e[2] for e in decomp_entries) < 256

    compositions = sorted(norm["primary"])
    # Code points that can make NFC change a string: NFC_Quick_Check No or
    # Maybe, or a nonzero combining class. A string with none is already NFC.
    sensitive = set(norm["nfc_no"])
    sensitive.update(second for _, second, _ in compositions)
    sensitive.update(cp for cp, _ in norm["ccc"])
    sensitive.update(range(0x1161, 0x1176))  # Hangul V jamo compose with L
    sensitive.update(range(0x11A8, 0x11C3))  # Hangul T jamo compose with LV
    sensitive_ranges = ranges_of((cp, 1) for cp in sorted(sensitive))

    out = []
    out.append("// GENERATED by tools/gen_unicode_tables.py; do not edit by hand.")
    out.append("// Character classes: Unicode %s (what HF tokenizers' regex engine knows)." %
               CATEGORY_VERSION)
    out.append("// Normalization: Unicode %s (what HF tokenizers' NFC uses)." % NORMALIZATION_VERSION)
    out.append("// clang-format off")
    out.append('#include "data/unicode_tables.h"')
    out.append("")
    out.append("namespace lt::data::unicode_tables {")
    out.append("")
    out.append("const CodePointRange kCharClassRanges[] = {")
    out.append(wrap(["{0x%X, 0x%X, %d}," % tuple(r) for r in class_ranges], 4))
    out.append("};")
    out.append("const size_t kCharClassRangeCount = %d;" % len(class_ranges))
    out.append("")
    out.append("const CodePointRange kCombiningClassRanges[] = {")
    out.append(wrap(["{0x%X, 0x%X, %d}," % tuple(r) for r in ccc_ranges], 4))
    out.append("};")
    out.append("const size_t kCombiningClassRangeCount = %d;" % len(ccc_ranges))
    out.append("")
    out.append("const CodePointRange kNfcSensitiveRanges[] = {")
    out.append(wrap(["{0x%X, 0x%X, 1}," % (a, b) for a, b, _ in sensitive_ranges], 5))
    out.append("};")
    out.append("const size_t kNfcSensitiveRangeCount = %d;" % len(sensitive_ranges))
    out.append("")
    out.append("const Decomposition kDecompositions[] = {")
    out.append(wrap(["{0x%X, %d, %d}," % e for e in decomp_entries], 5))
    out.append("};")
    out.append("const size_t kDecompositionCount = %d;" % len(decomp_entries))
    out.append("const char32_t kDecompositionData[] = {")
    out.append(wrap(["0x%X," % cp for cp in decomp_data], 10))
    out.append("};")
    out.append("")
    out.append("const Composition kCompositions[] = {")
    out.append(wrap(["{0x%X, 0x%X, 0x%X}," % tuple(c) for c in compositions], 4))
    out.append("};")
    out.append("const size_t kCompositionCount = %d;" % len(compositions))
    out.append("")
    out.append("}  // namespace lt::data::unicode_tables")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %s: %d class ranges, %d ccc ranges, %d decompositions, %d compositions" %
          (args.out, len(class_ranges), len(ccc_ranges), len(decomp_entries), len(compositions)))


if __name__ == "__main__":
    main()
