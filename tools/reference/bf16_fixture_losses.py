#!/usr/bin/env python3
"""transformers' loss on each model fixture under bf16 autocast on a GPU.

Run on the GPU machine (torch + transformers + CUDA):

    python3 tools/reference/bf16_fixture_losses.py tests/models/fixtures/families

For every fixture folder (written by make_model_fixtures.py) it loads the
f32 model with transformers, runs its reference batch (input_ids, labels
from reference.safetensors) under torch.autocast("cuda", torch.bfloat16)
with sdpa attention, and records the loss. It also records the float64 loss
of the same batch (eager attention on the CPU) as the exact value. Output:
<dir>/bf16_autocast_losses.json, which tests/gpu/model_bf16_gpu_test.cpp
compares lazytrain's bf16 loss against.
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import load_file

FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gpt2"]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/models/fixtures/families"
    assert torch.cuda.is_available(), "needs a CUDA GPU (autocast on cuda)"
    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0), "autocast_bf16": {}, "f64": {}}
    for name in FAMILIES:
        folder = os.path.join(root, name)
        ref = load_file(os.path.join(folder, "reference.safetensors"))
        ids = ref["input_ids"].long()
        labels = ref["labels"].long()
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float32, attn_implementation="sdpa").cuda()
        model.train(False)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids.cuda(), labels=labels.cuda()).loss
        out["autocast_bf16"][name] = float(loss)
        exact = transformers.AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float64, attn_implementation="eager")
        exact.train(False)
        with torch.no_grad():
            out["f64"][name] = float(exact(input_ids=ids, labels=labels).loss)
        print(f"{name}: autocast bf16 {out['autocast_bf16'][name]:.6f}, "
              f"f64 {out['f64'][name]:.6f}")
    path = os.path.join(root, "bf16_autocast_losses.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
