#!/usr/bin/env python3
"""transformers' greedy generate on each model fixture: the tokens and, per
step, the gap between the two largest logits.

Run wherever torch and transformers are installed (the GPU machine has them):

    python3 tools/reference/make_generation_goldens.py tests/models/fixtures/families

For every fixture folder (written by make_model_fixtures.py) and each of a
few prompts, it runs model.generate(do_sample=False) and records:
  - "cpu_f32": f32 weights on the CPU, eager attention, no EOS
    (max_new_tokens tokens every time), and again with the EOS of the
    folder's generation_config.json (the run stops at it);
  - "cuda_bf16" (when a GPU is there): the model in bf16 on the GPU, sdpa
    attention, no EOS.
Each run keeps the new tokens and, per step, the difference between the
largest and the second largest logit ("gap"): where it is below the
tolerance a test allows, rounding may pick the other token, so a test
compares tokens only up to the first such step. The logits of the first
step are kept too (the prompt's last position). Output:
<dir>/generation_goldens.json, read by tests/models/generation_golden_test.cpp
and tests/gpu/generation_gpu_test.cpp.
"""
import json
import os
import sys

import torch
import transformers

FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gpt2"]
MAX_NEW_TOKENS = 24
VOCAB = 97  # the fixtures' vocabulary (make_model_fixtures.py)


def prompts():
    # Two lengths, so a batch of both has a padded row; ids spread over the
    # vocabulary by fixed strides (no generator: the same ids everywhere).
    return [[(i * 37 + 11) % VOCAB for i in range(7)],
            [(i * 53 + 5) % VOCAB for i in range(13)]]


def run(model, prompt, device, eos):
    ids = torch.tensor([prompt], device=device)
    config = transformers.GenerationConfig(
        do_sample=False, max_new_tokens=MAX_NEW_TOKENS, eos_token_id=eos,
        pad_token_id=eos[0] if eos else 0, output_logits=True, return_dict_in_generate=True)
    # generate() fills unset fields from the model's own generation_config,
    # EOS included: without EOS there must mean none at all.
    model.generation_config.eos_token_id = eos or None
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
    tokens = out.sequences[0, len(prompt):].tolist()
    gaps = []
    for step in out.logits:
        top = torch.topk(step[0].double(), 2).values
        gaps.append(float(top[0] - top[1]))
    return {"tokens": tokens, "gaps": gaps,
            "first_logits": out.logits[0][0].double().cpu().tolist()}


def eos_ids(folder):
    with open(os.path.join(folder, "generation_config.json")) as f:
        eos = json.load(f).get("eos_token_id")
    if eos is None:
        return []
    eos = eos if isinstance(eos, list) else [eos]
    return [e for e in eos if e < VOCAB]  # GPT-2's 50256 is outside the fixture's vocabulary


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/models/fixtures/families"
    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "max_new_tokens": MAX_NEW_TOKENS, "families": {}}
    for name in FAMILIES:
        folder = os.path.join(root, name)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, torch_dtype=torch.float32, attn_implementation="eager")
        model.eval()
        eos = eos_ids(folder)
        entry = {"eos_token_ids": eos, "prompts": []}
        gpu = None
        if torch.cuda.is_available():
            gpu = transformers.AutoModelForCausalLM.from_pretrained(
                folder, torch_dtype=torch.bfloat16, attn_implementation="sdpa").cuda()
            gpu.eval()
        for prompt in prompts():
            row = {"prompt": prompt, "cpu_f32": run(model, prompt, "cpu", [])}
            if eos:
                row["cpu_f32_eos"] = run(model, prompt, "cpu", eos)["tokens"]
            if gpu is not None:
                row["cuda_bf16"] = run(gpu, prompt, "cuda", [])
                del row["cuda_bf16"]["first_logits"]
            entry["prompts"].append(row)
            print(name, prompt[:3], row["cpu_f32"]["tokens"][:8],
                  "min gap %.2e" % min(row["cpu_f32"]["gaps"]))
        out["families"][name] = entry
    with open(os.path.join(root, "generation_goldens.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
