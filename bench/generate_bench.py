#!/usr/bin/env python3
"""Generation speed: `lazytrain generate` against transformers' generate, on
the GPU machine, for the Qwen2.5-3B shape (bench/models/qwen2.5-3b, random
bf16 weights): prompts of 512 tokens, 256 new tokens, batch 1 and 64,
greedy. Both sides are timed around generation alone (prefill included,
model loading not); the EOS is removed from the config so that every row
makes all 256 tokens on both sides. Optionally also the wall time of
`lazytrain eval --task math` on GSM8K's test split (1,319 rows).

    python3 bench/generate_bench.py --lazytrain build-gpu/lazytrain --out OUT
        [--gsm8k test.jsonl --tokenizer DIR]

Writes OUT/generate_bench.json and prints it.
"""
import argparse
import json
import os
import re
import subprocess
import time

import torch
import transformers

PROMPT, NEW = 512, 256


def make_model(folder):
    with open(os.path.join(os.path.dirname(__file__), "models/qwen2.5-3b/config.json")) as f:
        cfg = json.load(f)
    cfg["eos_token_id"] = None  # every row runs to NEW tokens
    cfg.pop("torch_dtype", None)
    config = transformers.Qwen2Config(**cfg)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(
            config, torch_dtype=torch.bfloat16, attn_implementation="sdpa")
    model.eval()
    model.generation_config.eos_token_id = None
    model.save_pretrained(folder, safe_serialization=True)
    gen_cfg = os.path.join(folder, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)
    return model


def prompts(batch, vocab=151000):
    g = torch.Generator().manual_seed(batch)
    return torch.randint(0, vocab, (batch, PROMPT), generator=g)


def transformers_tokens_per_s(model, ids):
    ids = ids.cuda()
    config = transformers.GenerationConfig(do_sample=False, max_new_tokens=NEW,
                                           min_new_tokens=NEW, eos_token_id=None, pad_token_id=0)
    with torch.no_grad():
        model.generate(ids[:, :16], attention_mask=torch.ones_like(ids[:, :16]),
                       generation_config=transformers.GenerationConfig(
                           do_sample=False, max_new_tokens=8, pad_token_id=0))  # warm-up
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
    made = (out.shape[1] - ids.shape[1]) * ids.shape[0]
    return made / seconds, seconds, made


def lazytrain_tokens_per_s(binary, folder, ids, out_dir):
    rows = os.path.join(out_dir, f"prompts_{ids.shape[0]}.jsonl")
    with open(rows, "w") as f:
        for row in ids.tolist():
            f.write(json.dumps({"input_ids": row}) + "\n")
    cmd = [binary, "generate", "--model", folder, "--data", rows, "--max-new-tokens", str(NEW),
           "--batch-size", str(ids.shape[0]), "--device", "cuda"]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    print(r.stderr[-2000:])
    m = re.search(r"(\d+) new tokens in ([0-9.]+) s \(([0-9.]+) tokens/s", r.stderr)
    if r.returncode != 0 or m is None:
        return None, None, None
    return float(m.group(3)), float(m.group(2)), int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lazytrain", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--folder", default="/tmp/qwen2.5-3b-random")
    ap.add_argument("--gsm8k")
    ap.add_argument("--tokenizer")
    ap.add_argument("--only-eval", action="store_true", help="skip the speed comparison")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    model = make_model(args.folder)
    result = {"shape": "qwen2.5-3b", "prompt": PROMPT, "new_tokens": NEW,
              "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "transformers": transformers.__version__}
    for batch in () if args.only_eval else (1, 64):
        ids = prompts(batch)
        tps, s, made = transformers_tokens_per_s(model, ids)
        result[f"transformers_b{batch}"] = {"tokens_per_s": tps, "seconds": s, "tokens": made}
        print(batch, "transformers", tps, flush=True)
    del model
    torch.cuda.empty_cache()
    for batch in () if args.only_eval else (1, 64):
        tps, s, made = lazytrain_tokens_per_s(args.lazytrain, args.folder, prompts(batch), args.out)
        result[f"lazytrain_b{batch}"] = {"tokens_per_s": tps, "seconds": s, "tokens": made}
        t = result[f"transformers_b{batch}"]["tokens_per_s"]
        result[f"speedup_b{batch}"] = tps / t if tps else None
        print(batch, "lazytrain", tps, flush=True)
    if args.gsm8k:
        cmd = [args.lazytrain, "eval", "--task", "math", "--model", args.folder, "--tokenizer",
               args.tokenizer, "--data", args.gsm8k, "--max-new-tokens", str(NEW),
               "--batch-size", "64", "--device", "cuda", "--json"]
        start = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        print(r.stderr[-2000:])
        result["eval_math_gsm8k_test"] = {"wall_s": wall, "returncode": r.returncode,
                                          "result": json.loads(r.stdout) if r.returncode == 0 else None}
    with open(os.path.join(args.out, "generate_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
