#!/usr/bin/env python3
"""Tiny random Hugging Face models and their reference loss and gradients.

Run wherever torch and transformers are installed (the GPU machine has them):

    python3 tools/reference/make_model_fixtures.py tests/models/fixtures/families

For each family it writes <out>/<name>/ with the model saved by
save_pretrained (f32 safetensors + config.json) and reference.safetensors
holding, in float64:
  - "input_ids" (i64 [B, T]) and "labels" (i64 [B, T], -100 = ignored),
  - "loss" (0-dim): the mean next-token cross-entropy transformers computes
    from model(input_ids, labels=labels),
  - "grad.<hf name>": d loss / d parameter for every parameter.
The forward and backward run in float64 on the CPU with eager attention, so
the reference is exact to ~1e-15 for the f32 weights that were saved.
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file

torch.manual_seed(0)

COMMON = dict(vocab_size=97, num_hidden_layers=2, max_position_embeddings=64)

VARIANTS = {
    # GQA ratio 3, untied, llama3 rope scaling with a tiny original context
    # so the scaling changes some of the frequencies.
    "llama": (transformers.LlamaConfig, dict(
        hidden_size=48, intermediate_size=37, num_attention_heads=6, num_key_value_heads=2,
        rope_theta=500000.0, tie_word_embeddings=False, rms_norm_eps=1e-5,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 16})),
    # GQA ratio 4, untied, no sliding window.
    "mistral": (transformers.MistralConfig, dict(
        hidden_size=32, intermediate_size=45, num_attention_heads=4, num_key_value_heads=1,
        sliding_window=None, tie_word_embeddings=False, rms_norm_eps=1e-6)),
    # GQA ratio 1, tied, qkv bias.
    "qwen2": (transformers.Qwen2Config, dict(
        hidden_size=32, intermediate_size=29, num_attention_heads=4, num_key_value_heads=4,
        tie_word_embeddings=True, use_sliding_window=False, rms_norm_eps=1e-6)),
    # GQA ratio 2, tied, qk-norm, head_dim != hidden / heads.
    "qwen3": (transformers.Qwen3Config, dict(
        hidden_size=32, intermediate_size=41, num_attention_heads=4, num_key_value_heads=2,
        head_dim=12, tie_word_embeddings=True, use_sliding_window=False, rms_norm_eps=1e-6)),
    "gpt2": (transformers.GPT2Config, dict(
        n_embd=32, n_layer=2, n_head=4, n_positions=64, vocab_size=97,
        layer_norm_epsilon=1e-5, tie_word_embeddings=True)),
}


def build(name):
    cls, kwargs = VARIANTS[name]
    args = dict(COMMON)
    args.update(kwargs)
    if int(transformers.__version__.split(".")[0]) >= 5 and name != "gpt2":
        # transformers 5 keeps rope settings in rope_parameters.
        rope = dict(args.pop("rope_scaling", None) or {"rope_type": "default"})
        rope["rope_theta"] = args.pop("rope_theta", 10000.0)
        args["rope_parameters"] = rope
    if name == "gpt2":
        for k in ("num_hidden_layers", "max_position_embeddings"):
            args.pop(k)
    config = cls(**args)
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model = model.float()
    # Perturb what initialization leaves constant (norm weights at 1, biases
    # at 0) so their gradients are not special cases.
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "norm" in pname or "ln_" in pname or pname.endswith("bias"):
                p.copy_(torch.empty_like(p).uniform_(0.5, 1.5) if pname.endswith("weight")
                        else torch.empty_like(p).uniform_(-0.3, 0.3))
            elif p.dim() >= 2:
                p.mul_(10.0)  # std 0.2: enough signal through two layers
    return model


def main():
    out_root = sys.argv[1] if len(sys.argv) > 1 else "tests/models/fixtures/families"
    os.makedirs(out_root, exist_ok=True)
    summary = {"transformers": transformers.__version__, "torch": torch.__version__}
    for name in VARIANTS:
        model = build(name)
        folder = os.path.join(out_root, name)
        model.save_pretrained(folder, safe_serialization=True)
        # The reference uses exactly the saved f32 values, upcast.
        ref = model.double()
        ref.train(False)
        gen = torch.Generator().manual_seed(1)
        ids = torch.randint(0, 97, (2, 11), generator=gen)
        labels = ids.clone()
        labels[1, :3] = -100  # a masked prompt
        out = ref(input_ids=ids, labels=labels)
        out.loss.backward()
        tensors = {"input_ids": ids, "labels": labels, "loss": out.loss.detach().clone()}
        for pname, p in ref.named_parameters():
            tensors["grad." + pname] = p.grad.detach().clone()
        save_file({k: v.contiguous() for k, v in tensors.items()},
                  os.path.join(folder, "reference.safetensors"))
        summary[name] = float(out.loss)
        print(f"{name}: loss {float(out.loss):.10f}")
    with open(os.path.join(out_root, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
