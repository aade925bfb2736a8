#!/usr/bin/env python3
"""Peer benchmark for issue 20: DeepSpeed ZeRO-Offload and DeepSpeed ZenFlow.

Trains a Qwen2.5-shaped model (config.json only, random init in bf16) on random
tokens with DeepSpeed ZeRO-2, the optimizer (AdamW, lr 1e-5, weight decay 0.01,
grad clip 1.0) offloaded to pinned CPU memory:

  --mode zero_offload   DeepSpeedCPUAdam updates everything every step.
  --mode zenflow        zero_optimization.zenflow {topk_ratio 0.1,
                        update_interval 4, overlap_step true}.

Runs as a single process without the `deepspeed` launcher (RANK=0 WORLD_SIZE=1
LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 are set unless already
set).  ZenFlow starts its CPU optimizer in a process made with the "spawn"
method, which re-imports this file: everything heavy happens under the
`if __name__ == "__main__":` guard.

Measurement: `--warmup` steps, then `--steps` timed steps; a step is one
optimizer step of `--batch` sequences (batch / micro-batch micro-steps).  The
GPU is synchronized at the end of every step.  Reported:
  tokens_per_s_wall    batch * seq * steps / wall time of the timed steps
                       (this is the headline figure; it includes stalls)
  median_step_s        median of the timed steps, and tokens_per_s_median
  gpu_peak_bytes       torch.cuda.max_memory_allocated over the whole run
  host_used_peak_bytes peak of (total - available) host memory, whole machine
One JSON line per run is appended to --out, also when the run fails, is killed
by SIGTERM (e.g. `timeout`) or is stopped by the host-memory guard (status
field; the steps done until then are in it).
"""

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time

GiB = 1024**3


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="folder with a config.json (Qwen2 shape)")
    p.add_argument("--mode", required=True, choices=["zero_offload", "zenflow"])
    p.add_argument("--batch", type=int, default=8, help="sequences per optimizer step")
    p.add_argument("--micro-batch", type=int, default=None,
                   help="sequences per forward/backward (default: --batch); zenflow needs micro == batch")
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--steps", type=int, default=12, help="timed steps")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed steps first; default 2 for zero_offload, update_interval for zenflow (its "
                   "first window: its CPU optimizer process is spawned and allocates its state at the first "
                   "update, a one-time cost of seconds that would otherwise land in the timed steps)")
    p.add_argument("--out", required=True, help="JSONL file; one line is appended")
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--topk-ratio", type=float, default=0.1)
    p.add_argument("--update-interval", type=int, default=4)
    p.add_argument("--no-overlap-step", action="store_true", help="zenflow overlap_step false")
    p.add_argument("--overlap-comm", choices=["auto", "on", "off"], default="auto",
                   help="zero_optimization.overlap_comm; auto: on for zero_offload (as DeepSpeed's "
                   "ZeRO-Offload tutorial), DeepSpeed's default (off at stage 2) for zenflow (as its example)")
    p.add_argument("--grad-ckpt", action="store_true", help="activation checkpointing (off by default)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--min-host-avail-gb", type=float, default=6.0,
                   help="stop the run (status host_memory_guard) when the machine's available memory falls below")
    p.add_argument("--extra-config", default=None, help="JSON merged into the DeepSpeed config (recursive)")
    p.add_argument("--label", default=None, help="free text stored in the JSON line")
    p.add_argument("--print-config", action="store_true", help="print the DeepSpeed config and exit")
    p.add_argument("--smoke-cpu", action="store_true",
                   help="test of this script without a GPU: DeepSpeed's CPU accelerator, the model shrunk to "
                   "2 layers of width 64 and a vocabulary of 512 (figures meaningless)")
    a = p.parse_args(argv)
    if a.micro_batch is None:
        a.micro_batch = a.batch
    if a.batch % a.micro_batch:
        p.error("--batch must be a multiple of --micro-batch")
    if a.mode == "zenflow" and a.micro_batch != a.batch:
        # ZenFlow reuses DeepSpeed's gradient accumulation for its update window
        # (it sets gradient_accumulation_steps = update_interval), so a step is one micro-batch.
        p.error("--mode zenflow needs --micro-batch == --batch (ZenFlow takes over gradient accumulation)")
    if a.warmup is None:
        a.warmup = a.update_interval if a.mode == "zenflow" else 2
    if a.steps < 1 or a.warmup < 0:
        p.error("--steps >= 1 and --warmup >= 0")
    return a


def merge(dst, src):
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            merge(dst[k], v)
        else:
            dst[k] = v
    return dst


def ds_config(a):
    gas = a.batch // a.micro_batch
    overlap_comm = {"on": True, "off": False, "auto": True if a.mode == "zero_offload" else None}[a.overlap_comm]
    zero = {
        "stage": 2,
        "offload_optimizer": {"device": "cpu", "pin_memory": True},
        "contiguous_gradients": True,
    }
    if overlap_comm is not None:
        zero["overlap_comm"] = overlap_comm
    if a.mode == "zenflow":
        zero["zenflow"] = {
            "topk_ratio": a.topk_ratio,
            "update_interval": a.update_interval,
            "full_warm_up_rounds": 0,
            "overlap_step": not a.no_overlap_step,
        }
    cfg = {
        "train_batch_size": a.batch,
        "train_micro_batch_size_per_gpu": a.micro_batch,
        "gradient_accumulation_steps": gas,
        "bf16": {"enabled": True},
        "zero_optimization": zero,
        "optimizer": {
            "type": "AdamW",
            "params": {"lr": a.lr, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": a.weight_decay},
        },
        "gradient_clipping": a.grad_clip,
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }
    if a.extra_config:
        merge(cfg, json.loads(a.extra_config))
    return cfg


class HostMemoryGuard(threading.Thread):
    """Samples the machine's memory every 0.1 s; below the floor it calls on_low() once."""

    def __init__(self, floor_bytes, on_low):
        super().__init__(daemon=True)
        self.floor = floor_bytes
        self.on_low = on_low
        self.used_peak = 0
        self.avail_min = None
        self.tree_rss_peak = 0
        self._stop = threading.Event()

    def run(self):
        import psutil
        me = psutil.Process()
        n = 0
        while not self._stop.is_set():
            vm = psutil.virtual_memory()
            self.used_peak = max(self.used_peak, vm.total - vm.available)
            self.avail_min = vm.available if self.avail_min is None else min(self.avail_min, vm.available)
            if n % 10 == 0:  # the process tree's RSS once a second (children: ZenFlow's optimizer)
                try:
                    rss = me.memory_info().rss + sum(c.memory_info().rss for c in me.children(recursive=True))
                    self.tree_rss_peak = max(self.tree_rss_peak, rss)
                except Exception:
                    pass
            if vm.available < self.floor:
                self.on_low(vm.available)
                return
            n += 1
            self._stop.wait(0.1)

    def stop(self):
        self._stop.set()


def kill_children():
    try:
        import psutil
        for c in psutil.Process().children(recursive=True):
            try:
                c.kill()
            except Exception:
                pass
    except Exception:
        pass


def main():
    a = parse_args()
    for k, v in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1"),
                 ("MASTER_PORT", "29511")):
        os.environ.setdefault(k, v)
    if a.smoke_cpu:
        os.environ["DS_ACCELERATOR"] = "cpu"
    cfg = ds_config(a)
    if a.print_config:
        print(json.dumps(cfg, indent=1))
        return 0

    t_start = time.time()
    rec = {
        "system": "deepspeed_" + a.mode,
        "mode": a.mode,
        "model": os.path.basename(os.path.normpath(a.model)),
        "seq": a.seq,
        "batch": a.batch,
        "micro_batch": a.micro_batch,
        "grad_accum": a.batch // a.micro_batch,
        "steps": a.steps,
        "warmup": a.warmup,
        "grad_ckpt": a.grad_ckpt,
        "smoke_cpu": a.smoke_cpu,
        "label": a.label,
        "status": "starting",
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ds_config": cfg,
        "step_times_s": [],
        "warmup_times_s": [],
        "losses": [],
    }
    lock = threading.Lock()
    written = [False]
    guard = [None]

    def finish(status, error=None):
        """Append the JSON line once, whatever the way out."""
        with lock:
            if written[0]:
                return
            written[0] = True
            rec["status"] = status
            if error:
                rec["error"] = str(error)[-2000:]
            st = list(rec["step_times_s"])
            tok = a.batch * a.seq
            rec["timed_steps_done"] = len(st)
            rec["tokens_per_step"] = tok
            if st:
                wall = rec.get("timed_wall_s") or sum(st)
                rec["timed_wall_s"] = wall
                rec["tokens_per_s_wall"] = tok * len(st) / wall
                rec["median_step_s"] = statistics.median(st)
                rec["tokens_per_s_median"] = tok / rec["median_step_s"]
                rec["min_step_s"] = min(st)
                rec["max_step_s"] = max(st)
            try:
                import torch
                if torch.cuda.is_available() and torch.cuda.is_initialized():
                    rec["gpu_peak_bytes"] = torch.cuda.max_memory_allocated()
                    rec["gpu_peak_gb"] = round(rec["gpu_peak_bytes"] / 1e9, 2)
                    rec["gpu_peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
            except Exception:
                pass
            g = guard[0]
            if g is not None:
                rec["host_used_peak_bytes"] = g.used_peak
                rec["host_used_peak_gb"] = round(g.used_peak / 1e9, 2)
                rec["host_avail_min_gb"] = None if g.avail_min is None else round(g.avail_min / 1e9, 2)
                rec["process_tree_rss_peak_gb"] = round(g.tree_rss_peak / 1e9, 2)
            rec["elapsed_s"] = round(time.time() - t_start, 1)
            line = json.dumps(rec)
            os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
            with open(a.out, "a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())
            summary = {k: rec.get(k) for k in ("system", "model", "status", "timed_steps_done", "tokens_per_s_wall",
                                               "median_step_s", "tokens_per_s_median", "gpu_peak_gb",
                                               "host_used_peak_gb")}
            print("RESULT " + json.dumps(summary), flush=True)

    def on_sigterm(signum, frame):
        finish("killed_signal_%d" % signum, "killed by signal %d (timeout?)" % signum)
        kill_children()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, on_sigterm)

    def on_low_memory(avail):
        msg = "host memory guard: available %.1f GB < %.1f GB; stopping" % (avail / 1e9, a.min_host_avail_gb)
        print(msg, flush=True)
        kill_children()  # ZenFlow's optimizer process holds much of it
        finish("host_memory_guard", msg)
        os._exit(3)

    g = HostMemoryGuard(int(a.min_host_avail_gb * 1e9), on_low_memory)
    guard[0] = g
    g.start()

    try:
        import torch
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM
        import deepspeed

        rec["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                           "deepspeed": deepspeed.__version__, "python": sys.version.split()[0]}
        print("versions:", rec["versions"], flush=True)
        torch.manual_seed(a.seed)
        dev = "cpu" if a.smoke_cpu else "cuda"
        if dev == "cuda":
            torch.cuda.set_device(0)

        def sync():
            if dev == "cuda":
                torch.cuda.synchronize()

        def gpu_peak():
            return torch.cuda.max_memory_allocated() if dev == "cuda" else 0

        mcfg = AutoConfig.from_pretrained(a.model)
        mcfg.use_cache = False
        if a.smoke_cpu:
            for k, v in (("hidden_size", 64), ("intermediate_size", 128), ("num_hidden_layers", 2),
                         ("num_attention_heads", 4), ("num_key_value_heads", 2), ("vocab_size", 512),
                         ("max_window_layers", 2)):
                setattr(mcfg, k, v)
        t0 = time.time()
        with torch.device(dev):
            try:
                model = AutoModelForCausalLM.from_config(mcfg, dtype=torch.bfloat16, attn_implementation="sdpa")
            except TypeError:
                model = AutoModelForCausalLM.from_config(mcfg, torch_dtype=torch.bfloat16,
                                                         attn_implementation="sdpa")
        if a.grad_ckpt:
            model.gradient_checkpointing_enable()
        model.train()
        n_params = sum(p.numel() for p in model.parameters())
        rec["params"] = n_params
        rec["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
        print("model %s: %.3f B parameters (unique), built in %.1f s" % (rec["model"], n_params / 1e9,
                                                                           time.time() - t0), flush=True)

        t0 = time.time()
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=cfg)
        rec["init_s"] = round(time.time() - t0, 1)
        rec["optimizer_class"] = type(engine.optimizer).__name__
        inner = getattr(engine.optimizer, "optimizer", None)
        rec["inner_optimizer_class"] = type(inner).__name__ if inner is not None else None
        print("deepspeed.initialize: %.1f s, optimizer %s / %s" % (rec["init_s"], rec["optimizer_class"],
                                                                    rec["inner_optimizer_class"]), flush=True)

        gas = a.batch // a.micro_batch
        vocab = mcfg.vocab_size
        gen = torch.Generator(device=dev)
        gen.manual_seed(a.seed)
        # A few distinct random batches, drawn before timing.
        data = [torch.randint(0, vocab, (a.micro_batch, a.seq), device=dev, generator=gen) for _ in range(4)]

        def one_step(i):
            losses = []
            for m in range(gas):
                ids = data[(i * gas + m) % len(data)]
                out = engine(input_ids=ids, labels=ids)
                engine.backward(out.loss)
                engine.step()
                losses.append(out.loss.detach())
            sync()
            return sum(float(x) for x in losses) / len(losses)

        total = a.warmup + a.steps
        t_timed0 = None
        for i in range(total):
            if i == a.warmup:
                sync()
                t_timed0 = time.perf_counter()
            t0 = time.perf_counter()
            loss = one_step(i)
            dt = time.perf_counter() - t0
            timed = i >= a.warmup
            (rec["step_times_s"] if timed else rec["warmup_times_s"]).append(round(dt, 4))
            rec["losses"].append(round(loss, 4))
            if timed:
                rec["timed_wall_s"] = time.perf_counter() - t_timed0
            print("step %3d %s %.3f s  loss %.4f  gpu %.1f GB  host used peak %.1f GB" % (
                i, "timed " if timed else "warmup", dt, loss, gpu_peak() / 1e9,
                g.used_peak / 1e9), flush=True)
        sync()
        rec["timed_wall_s"] = time.perf_counter() - t_timed0
        g.stop()
        finish("ok")
        rc = 0
    except BaseException as e:  # noqa: BLE001 - record every failure
        import traceback
        traceback.print_exc()
        finish("error", "%s: %s" % (type(e).__name__, e))
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    # Do not wait for DeepSpeed's teardown (ZenFlow's optimizer process, NCCL).
    kill_children()
    os._exit(rc)


if __name__ == "__main__":
    main()
