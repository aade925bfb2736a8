#!/usr/bin/env python3
"""GPT-2 goldens in llm.c's manner (its test_gpt2: logits, loss, every
gradient at step 0, then the losses of 10 optimizer steps) for a GPT-2 small
enough that the files stay small.

    python3 tools/reference/make_gpt2_golden.py tests/models/fixtures/gpt2_golden

The model is transformers' GPT2LMHeadModel: 2 layers, n_embd 128, 2 heads
(head_dim 64, GPT-2's, so the GPU runs its real attention kernels), MLP
width 256, 64 positions and an odd vocabulary of 313 (GPT-2's 50257 is odd
too, so the fused head's padding is exercised), tied embeddings. Weights are
GPT-2's init times 4 (std 0.08) and norms and biases perturbed, so that the
logits are far from uniform and every gradient is a general case. Saved with
save_pretrained (f32 safetensors + config.json) in OUT, and beside it:

  reference.safetensors, computed in float64 on the CPU (eager attention)
  from exactly the saved f32 weights:
    "input_ids" (i64 [4, 64]) and "labels" (= input_ids, as Hugging Face
    takes them; every position but the last is predicted),
    "logits" (f32 [4, 64, 313], rounded once from f64), "loss" (f64, 0-dim),
    "grad.<hf name>" (f32: d loss / d parameter, rounded once from f64).
  The loss is transformers' causal-LM loss written out in float64
  (next_token_loss), checked against transformers' own.
  training.json: 10 steps of torch.optim.AdamW (lr 1e-3, betas (0.9, 0.95),
    eps 1e-8, weight decay 0.1 on the 2-D weights only, as llm.c) with
    torch.nn.utils.clip_grad_norm_(max_norm 1.0) before each update, on the
    same batch every step: the loss and the gradient norm (before clipping)
    of each step, in float64 and in float32.
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file

BATCH, SEQ, VOCAB = 4, 64, 313
STEPS, LR, BETAS, EPS, WEIGHT_DECAY, MAX_NORM = 10, 1e-3, (0.9, 0.95), 1e-8, 0.1, 1.0


def build():
    torch.manual_seed(25)
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=128, n_layer=2, n_head=2, n_inner=256,
        layer_norm_epsilon=1e-5, tie_word_embeddings=True, activation_function="gelu_new",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(config).float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln_" in name and name.endswith("weight"):
                p.copy_(torch.empty_like(p).uniform_(0.6, 1.4))
            elif name.endswith("bias"):
                p.copy_(torch.empty_like(p).uniform_(-0.2, 0.2))
            else:
                p.mul_(4.0)
    return model


def next_token_loss(model, ids):
    """transformers' causal-LM loss (labels = input_ids: position t predicts
    token t + 1, the mean over every predicted position), computed in the
    model's dtype: transformers' own loss upcasts the logits to float32
    (logits.float()), which for a float64 model would round them down."""
    logits = model(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    return logits, loss


def train(folder, dtype, ids):
    model = transformers.GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager",
                                                         dtype=dtype)
    model.eval()  # no dropout; gradients still flow
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS, foreach=False)
    losses, norms = [], []
    for _ in range(STEPS):
        opt.zero_grad()
        _, loss = next_token_loss(model, ids)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        losses.append(float(loss.detach()))
        norms.append(float(norm))
        opt.step()
    return {"loss": losses, "grad_norm": norms}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/models/fixtures/gpt2_golden"
    os.makedirs(out, exist_ok=True)
    model = build()
    model.save_pretrained(out, safe_serialization=True)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(26))

    ref = transformers.GPT2LMHeadModel.from_pretrained(out, attn_implementation="eager",
                                                       dtype=torch.float64)
    ref.eval()
    logits, loss = next_token_loss(ref, ids)
    # The same loss as transformers' own (to its float32 rounding).
    hf_loss = float(ref(input_ids=ids, labels=ids).loss)
    assert abs(hf_loss - float(loss)) < 1e-6 * float(loss), (hf_loss, float(loss))
    loss.backward()
    tensors = {"input_ids": ids, "labels": ids.clone(), "logits": logits.detach().float(),
               "loss": loss.detach()}
    for name, p in ref.named_parameters():
        tensors["grad." + name] = p.grad.detach().float()
    save_file({k: v.contiguous() for k, v in tensors.items()},
              os.path.join(out, "reference.safetensors"))

    training = {"transformers": transformers.__version__, "torch": torch.__version__,
                "optimizer": f"AdamW lr={LR} betas={BETAS} eps={EPS} weight_decay={WEIGHT_DECAY} "
                             f"on 2-D weights, clip_grad_norm_ {MAX_NORM}, {STEPS} steps",
                "f64": train(out, torch.float64, ids), "f32": train(out, torch.float32, ids)}
    with open(os.path.join(out, "training.json"), "w") as f:
        json.dump(training, f, indent=1)
    print("loss", float(loss))
    print("f64", training["f64"])
    print("f32", training["f32"])


if __name__ == "__main__":
    main()
