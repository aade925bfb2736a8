#!/usr/bin/env python3
"""Writes a Hugging Face folder (config.json + model.safetensors, bf16) of
cheap finite weights for a llama/qwen2-style config, for speed runs of
`lazytrain train` with model.init: pretrained.

`model.init: random` draws every weight from one sequential generator (about
2 minutes for the 7B shape), twice per benchmark; this writes tiles of one
N(0, 0.02) table instead (shifted per tensor), norms 1 and biases 0, at disk
speed. Speed does not depend on the values (as fill_tiles in
tests/gpu/streaming_gpu_test.cpp). Standard library only.

Usage: bench/tiled_checkpoint.py CONFIG_JSON OUT_DIR
"""
import array
import json
import os
import random
import shutil
import struct
import sys

TILE = 1 << 20  # values in the table


def tensors(c):
    """(name, shape) in the Hugging Face names of llama/mistral/qwen2."""
    h, L = c["hidden_size"], c["num_hidden_layers"]
    heads, kv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    hd = c.get("head_dim") or h // heads
    ffn, vocab = c["intermediate_size"], c["vocab_size"]
    qkv_bias = c["model_type"] == "qwen2" or c.get("attention_bias", False)
    out = [("model.embed_tokens.weight", [vocab, h])]
    for i in range(L):
        p = f"model.layers.{i}."
        out.append((p + "input_layernorm.weight", [h]))
        for name, rows in (("q_proj", heads * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
            out.append((p + f"self_attn.{name}.weight", [rows, h]))
            if qkv_bias:
                out.append((p + f"self_attn.{name}.bias", [rows]))
        out.append((p + "self_attn.o_proj.weight", [h, heads * hd]))
        out.append((p + "post_attention_layernorm.weight", [h]))
        out.append((p + "mlp.gate_proj.weight", [ffn, h]))
        out.append((p + "mlp.up_proj.weight", [ffn, h]))
        out.append((p + "mlp.down_proj.weight", [h, ffn]))
    out.append(("model.norm.weight", [h]))
    if not c.get("tie_word_embeddings", False):
        out.append(("lm_head.weight", [vocab, h]))
    return out


def bf16_bytes(values):
    bits = array.array("I", array.array("f", values).tobytes())
    return array.array("H", ((b + 0x8000) >> 16 for b in bits)).tobytes()  # rounded


def main():
    config_path, out_dir = sys.argv[1], sys.argv[2]
    c = json.load(open(config_path))
    if c["model_type"] not in ("llama", "mistral", "qwen2"):
        sys.exit(f"{config_path}: model_type {c['model_type']}: only llama, mistral, qwen2")
    os.makedirs(out_dir, exist_ok=True)
    shutil.copyfile(config_path, os.path.join(out_dir, "config.json"))
    rng = random.Random(0)
    table = bf16_bytes([rng.gauss(0.0, 0.02) for _ in range(TILE)])
    doubled = memoryview(table + table)
    one, zero = struct.pack("<H", 0x3F80), b"\0\0"
    header, offset, layout = {}, 0, tensors(c)
    for name, shape in layout:
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + 2 * n]}
        offset += 2 * n
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    path = os.path.join(out_dir, "model.safetensors")
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        shift = 0
        for name, shape in layout:
            n = 1
            for d in shape:
                n *= d
            if len(shape) == 1:  # norms 1, biases 0
                f.write((one if name.endswith("norm.weight") else zero) * n)
                continue
            at = 0
            while at < n:
                k = min(TILE, n - at)
                start = (shift + (at // TILE) * 131) % TILE
                f.write(doubled[2 * start: 2 * (start + k)])
                at += k
            shift += 7919
    os.replace(path + ".tmp", path)
    print(f"{path}: {len(layout)} tensors, {offset / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
