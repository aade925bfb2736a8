#!/usr/bin/env python3
"""Writes safetensors fixtures with the reference `safetensors` package.

The C++ tests (tests/io/safetensors_reference_test.cpp) read these files and
compare against the formulas below, written down there independently; they
never compare against values produced by lazytrain itself.

    pip install safetensors numpy
    python tools/reference/make_safetensors_fixtures.py [--out tests/io/fixtures]

Files:
  reference_all_dtypes.safetensors   one tensor per dtype, metadata
      f32    F32  [2, 3]  v[i] = 0.5 * i - 1.0
      f64    F64  [4]     v[i] = 1 / (i + 3)
      bf16   BF16 [2, 2]  1.0, -2.5, 0.15625, 65536.0 (exact in bf16)
      f16    F16  [5]     v[i] = 0.25 * i - 0.5
      i64    I64  [3]     -(2**40), 0, 2**40 + 7
      i32    I32  [2, 3]  v[i] = i * i - 3
      i8     I8   [4]     -128, -1, 0, 127
      u8     U8   [3]     0, 128, 255
      bool   BOOL [4]     true, false, false, true
      empty  F32  [0, 3]
      scalar F32  []      42.0
      metadata {"format": "pt", "made_by": "make_safetensors_fixtures.py"}
  reference_unsupported_u16.safetensors
      ok     F32  [2]     1.5, -1.5
      u16    U16  [3]     1, 2, 65535
  reference_sharded/   a transformers-style sharded folder
      model-00001-of-00002.safetensors: model.embed_tokens.weight F32 [4, 2] v[i] = i / 4
                                        model.norm.weight         F32 [2]    1.0, 2.0
      model-00002-of-00002.safetensors: lm_head.weight            F16 [4, 2] v[i] = -i / 8
      model.safetensors.index.json (json.dumps(indent=2, sort_keys=True), as transformers)
"""

import argparse
import json
import os

import numpy as np
import safetensors
from safetensors.numpy import save_file


def serialize_raw(tensors, path, metadata):
    """`tensors`: name -> (dtype name as the serializer spells it, numpy array
    holding the raw little-endian bytes). Needed for bfloat16, which numpy
    lacks: its bytes are passed through as uint16."""
    if hasattr(safetensors, "TensorSpec"):  # safetensors >= 0.8
        specs = {
            name: safetensors.TensorSpec(
                dtype=dtype, shape=list(arr.shape), data_ptr=arr.ctypes.data, data_len=arr.nbytes
            )
            for name, (dtype, arr) in tensors.items()
        }
        safetensors.serialize_file(specs, path, metadata=metadata)
    else:
        flat = {
            name: {"dtype": dtype, "shape": list(arr.shape), "data": arr.tobytes()}
            for name, (dtype, arr) in tensors.items()
        }
        safetensors.serialize_file(flat, path, metadata=metadata)


def bf16_bits(values):
    f32 = np.asarray(values, dtype="<f4")
    bits = f32.view("<u4")
    assert np.all(bits & 0xFFFF == 0), "values must be exact in bfloat16"
    return (bits >> 16).astype("<u2")


def all_dtypes(out):
    i6 = np.arange(6)
    tensors = {
        "f32": ("float32", (0.5 * i6 - 1.0).astype("<f4").reshape(2, 3)),
        "f64": ("float64", (1.0 / (np.arange(4) + 3)).astype("<f8")),
        "bf16": ("bfloat16", bf16_bits([1.0, -2.5, 0.15625, 65536.0]).reshape(2, 2)),
        "f16": ("float16", (0.25 * np.arange(5) - 0.5).astype("<f2")),
        "i64": ("int64", np.array([-(2**40), 0, 2**40 + 7], dtype="<i8")),
        "i32": ("int32", (i6 * i6 - 3).astype("<i4").reshape(2, 3)),
        "i8": ("int8", np.array([-128, -1, 0, 127], dtype="i1")),
        "u8": ("uint8", np.array([0, 128, 255], dtype="u1")),
        "bool": ("bool", np.array([True, False, False, True], dtype="?")),
        "empty": ("float32", np.zeros((0, 3), dtype="<f4")),
        "scalar": ("float32", np.array(42.0, dtype="<f4")),
    }
    metadata = {"format": "pt", "made_by": "make_safetensors_fixtures.py"}
    serialize_raw(tensors, os.path.join(out, "reference_all_dtypes.safetensors"), metadata)


def unsupported(out):
    save_file(
        {
            "ok": np.array([1.5, -1.5], dtype="<f4"),
            "u16": np.array([1, 2, 65535], dtype="<u2"),
        },
        os.path.join(out, "reference_unsupported_u16.safetensors"),
    )


def sharded(out):
    folder = os.path.join(out, "reference_sharded")
    os.makedirs(folder, exist_ok=True)
    shards = {
        "model-00001-of-00002.safetensors": {
            "model.embed_tokens.weight": (np.arange(8) / 4).astype("<f4").reshape(4, 2),
            "model.norm.weight": np.array([1.0, 2.0], dtype="<f4"),
        },
        "model-00002-of-00002.safetensors": {
            "lm_head.weight": (-np.arange(8) / 8).astype("<f2").reshape(4, 2),
        },
    }
    weight_map = {}
    total = 0
    for file, tensors in shards.items():
        save_file(tensors, os.path.join(folder, file), metadata={"format": "pt"})
        for name, arr in tensors.items():
            weight_map[name] = file
            total += arr.nbytes
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        f.write(json.dumps(index, indent=2, sort_keys=True) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "..", "tests", "io", "fixtures")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=default_out)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    all_dtypes(args.out)
    unsupported(args.out)
    sharded(args.out)
    print(f"wrote fixtures to {os.path.normpath(args.out)} (safetensors {safetensors.__version__})")


if __name__ == "__main__":
    main()
