#!/usr/bin/env bash
# Issue 27: does `exec.mode: auto` choose the faster chunking of the 3B at
# 24 GB? In one call on the GPU machine: `lazytrain profile --model` of the
# 3B (the stage times alone, to compare with the run's own), then
# bench/offload_3b.sh's resident run (the reference), `streaming` (the
# planner's choice, its profile measured on the fly) and the hand schedules
# named (default: chunks of 32 with a tail of 4 in pieces of 8), then any
# further runs of offload_3b.sh named in LT_CHOICE_MORE (stream7b24, ...).
# Under OUT: bench.txt, profile.yaml, and runs.tar.xz with the hardware cache
# the planner priced with and each run's log and trace (for
# bench/use_vs_profile.py): the device tool brings back only a few files.
# Usage: bench/chunk_choice.sh OUT [schedules...]   (needs build-gpu/lazytrain)
set -uo pipefail
out=${1:?usage: bench/chunk_choice.sh OUT [schedules...]}
shift
schedules=${*:-3b24_c32_tail4_p8}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
mkdir -p "$out"
bin=${LT_BENCH_BIN:-build-gpu/lazytrain}
work=${LT_CHOICE_WORK:-/tmp/chunk_choice}  # data.jsonl is ~300 MB: not under OUT
nvidia-smi --query-gpu=name,power.limit,clocks.sm,temperature.gpu --format=csv > "$out/smi.txt" 2>&1
/usr/bin/time -f "profile: %e s" "$bin" profile --model bench/models/qwen2.5-3b \
  --out "$out/profile.yaml" > "$out/profile.txt" 2>&1
runs="resident streaming $schedules ${LT_CHOICE_MORE:-}"
LT_BENCH_BIN=$bin bash bench/offload_3b.sh "$work" $runs > "$out/bench.txt" 2>&1
files=(hardware-cache)
for run in $runs; do
  files+=("$run.log")
  [ "$run" = resident ] || files+=("$run/trace.json")
done
tar -C "$work" -cJf "$out/runs.tar.xz" --ignore-failed-read "${files[@]}" 2>/dev/null
exit 0
