#!/usr/bin/env python3
"""Per-step losses of torch.optim.AdamW training a fixture model.

    python3 tools/reference/make_training_golden.py tests/models/fixtures/families OUT.json

For each family fixture: load the saved model, train 4 steps on the fixture's
fixed batch (input_ids, labels from reference.safetensors) with AdamW
(lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01 on every
parameter), constant LR, no clipping. Records the loss of each step (before
that step's update) computed in float64 and in float32.
"""
import json
import sys

import torch
import transformers
from safetensors.torch import load_file


def run(folder, dtype, steps=4):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager", dtype=dtype)
    model.eval()  # no dropout (GPT-2 has 0.1 by default); gradients still flow
    ref = load_file(f"{folder}/reference.safetensors")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01, foreach=False)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = model(input_ids=ref["input_ids"], labels=ref["labels"]).loss
        loss.backward()
        losses.append(float(loss))
        opt.step()
    return losses


def main():
    root, out = sys.argv[1], sys.argv[2]
    result = {"transformers": transformers.__version__, "torch": torch.__version__,
              "optimizer": "AdamW lr=1e-3 betas=(0.9,0.999) eps=1e-8 wd=0.01 all params",
              "families": {}}
    for family in ("llama", "mistral", "qwen2", "qwen3", "gpt2"):
        folder = f"{root}/{family}"
        result["families"][family] = {"f64": run(folder, torch.float64),
                                      "f32": run(folder, torch.float32)}
        print(family, result["families"][family])
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
