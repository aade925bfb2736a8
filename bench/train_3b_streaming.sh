#!/usr/bin/env bash
# The 3B streaming benchmark on the GPU machine: lazytrain's streaming
# executor (host f32 masters + AdamW, bf16 weights streamed to the GPU) on
# the Qwen2.5-3B-shaped model (bench/models/qwen2.5-3b, random weights),
# seq 1024, every_kth 4 schedule, batch 8 and batch 32, medians over 4 steps
# after one warm-up (StreamingBench in tests/gpu/streaming_gpu_test.cpp).
# Needs build-gpu (bench/gpu.sh OUT build). Usage: bench/train_3b_streaming.sh OUT_DIR
# Env: LT_BENCH_BATCHES (8,32), LT_BENCH_MICRO (8), LT_BENCH_STEPS (4),
# LT_BENCH_LAYERS / LT_BENCH_SEQ shrink the run.
set -uo pipefail
out=${1:?usage: bench/train_3b_streaming.sh OUT_DIR}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ -d .devdeps ]; then
  export LD_LIBRARY_PATH=$PWD/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
status=0
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
nproc > "$out/cpus.txt"

echo "== lazytrain streaming bf16, every_kth 4"
LT_BENCH=1 timeout 200 ./build-gpu/test_gpu --gtest_filter='StreamingBench.*' \
  > "$out/streaming_3b.log" 2>&1 || status=1
grep -E '^batch|RESULT|FAILED|rror' "$out/streaming_3b.log" | tail -14

python3 - "$out/streaming_3b.log" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("RESULT "):
        rows.append(json.loads(line[7:]))
print("\n| batch | tokens/s | TFLOP/s (6NT) | median step s | GPU peak GB | host tensors peak GB | process RSS peak GB | compute | recompute | exposed h2d | exposed d2h | optimizer | bubbles |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for r in rows:
    print(f"| {r['batch']} | {r['tokens_per_s']:.0f} | {r['tflops']:.1f} | {r['median_step_s']:.3f} | "
          f"{r['peak_gb']:.1f} | {r.get('host_tensor_peak_gb', 0):.1f} | {r.get('process_peak_rss_gb', 0):.1f} | {r['compute_s']:.3f} | {r['recompute_s']:.3f} | {r['exposed_h2d_s']:.3f} | "
          f"{r['exposed_d2h_s']:.3f} | {r['optimizer_s']:.3f} | {r['bubbles_s']:.3f} |")
if not rows:
    print("| failed | | | | | | | | | | | | |")
PY
exit $status
