#!/usr/bin/env python3
"""Loads folders that `lazytrain convert` wrote with transformers and checks
that they give the reference loss of the fixture they came from.

    python3 tools/reference/check_converted.py FIXTURES_DIR CONVERTED_DIR [OUT_JSON]

For each family F in FIXTURES_DIR, CONVERTED_DIR/F-f32 and CONVERTED_DIR/F-bf16
must exist. Prints one line per folder and exits non-zero on a mismatch:
f32 must match to 1e-6 relative, bf16 to 2e-2 (rounding the weights).
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file


def main():
    fixtures, converted = sys.argv[1], sys.argv[2]
    results, ok = [], True
    for family in sorted(os.listdir(fixtures)):
        ref_path = os.path.join(fixtures, family, "reference.safetensors")
        if not os.path.exists(ref_path):
            continue
        ref = load_file(ref_path)
        for dtype, tol in (("f32", 1e-6), ("bf16", 2e-2)):
            folder = os.path.join(converted, f"{family}-{dtype}")
            model = transformers.AutoModelForCausalLM.from_pretrained(
                folder, attn_implementation="eager", dtype=torch.float64)
            with torch.no_grad():
                loss = float(model(input_ids=ref["input_ids"], labels=ref["labels"]).loss)
            expected = float(ref["loss"])
            rel = abs(loss - expected) / abs(expected)
            good = rel <= tol
            ok &= good
            results.append({"family": family, "dtype": dtype, "loss": loss,
                            "reference": expected, "relative_error": rel, "ok": good})
            print(f"{family:8s} {dtype:5s} loss {loss:.8f} reference {expected:.8f} "
                  f"rel {rel:.2e} {'ok' if good else 'MISMATCH'}")
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            json.dump(results, f, indent=1)
    sys.exit(0 if ok and results else 1)


if __name__ == "__main__":
    main()
