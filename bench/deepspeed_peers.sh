#!/usr/bin/env bash
# Peer benchmark for issue 20 on the GPU machine: DeepSpeed 0.19.8 ZeRO-Offload
# and DeepSpeed ZenFlow (topk 0.1, update_interval 4, overlap_step), seq 1024,
# batch 8, random tokens, through bench/deepspeed_offload.py.
#
# Usage (repo root, on the GPU machine, with .dswheels carried; make it here
# with bench/fetch_deepspeed_wheels.sh):
#   bench/deepspeed_peers.sh OUT_DIR [RUN...]
# RUN is MODE:MODEL_DIR (MODE zero_offload or zenflow) or a bare MODEL_DIR
# (both modes).  Default runs, in this order:
#   zero_offload:bench/models/qwen2.5-3b
#   zero_offload:bench/models/qwen2.5-1.5b
#   zenflow:bench/models/qwen2.5-1.5b
# (ZenFlow at 3B ran out of the machine's 128 GB of host memory on
# 2026-12-01; ask for it by name: zenflow:bench/models/qwen2.5-3b.)
#
# Writes OUT_DIR/deepspeed.jsonl (one line per run, also for failed, timed-out
# or memory-guarded runs), OUT_DIR/ds_<mode>_<model>.log per run and
# OUT_DIR/ds_setup.log; prints a summary table last.
#
# Environment knobs: DS_RUN_TIMEOUT (s per run, default 170), DS_BUDGET (s for
# the whole script, default 560: a run gets at most what is left, less 15 s,
# and is skipped with a JSON line when under 45 s remain), DS_STEPS (12),
# DS_WARMUP (driver's default: 2 for zero_offload, update_interval = 4 for
# zenflow, so that its one-time optimizer-process start is not timed), DS_BATCH (8), DS_MICRO (= batch), DS_MIN_AVAIL_GB (6: a run is
# stopped when the machine's available memory falls below), DSENV (install
# target, default /tmp/dsenv), DS_EXTRA_ARGS (more driver arguments), DS_WHEELS
# (wheel folder, default .dswheels), PYTHON (default python3).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
out=${1:?usage: bench/deepspeed_peers.sh OUT_DIR [RUN...]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
runs=("$@")
if [ ${#runs[@]} -eq 0 ]; then
  runs=(zero_offload:bench/models/qwen2.5-3b zero_offload:bench/models/qwen2.5-1.5b zenflow:bench/models/qwen2.5-1.5b)
fi
expanded=()
for r in "${runs[@]}"; do
  case "$r" in
    zero_offload:*|zenflow:*) expanded+=("$r") ;;
    *) expanded+=("zero_offload:$r" "zenflow:$r") ;;
  esac
done

setup_log=$out/ds_setup.log
: > "$setup_log"
py=${PYTHON:-python3}
dsenv=${DSENV:-/tmp/dsenv}

# 1. Install the carried wheels into a private target; nothing system-wide changes.
wheels=${DS_WHEELS:-.dswheels}
if [ ! -d "$wheels" ]; then
  echo "no $wheels here: run bench/fetch_deepspeed_wheels.sh and carry .dswheels" | tee -a "$setup_log"
  exit 2
fi
if ! "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
     --target "$dsenv" "$wheels"/*.whl >>"$setup_log" 2>&1; then
  echo "pip install of $wheels failed (see $setup_log)"; tail -20 "$setup_log"; exit 2
fi
export PYTHONPATH=$dsenv${PYTHONPATH:+:$PYTHONPATH}
export DS_SKIP_CUDA_CHECK=1 TORCH_CUDA_ARCH_LIST=9.0 DS_ACCELERATOR=${DS_ACCELERATOR:-cuda}
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/ds_torch_ext}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
# Keep the device machine's NCCL settings (KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

{
  echo "== $(date -u +%FT%TZ) $(hostname)"
  nproc; free -g | head -2
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  which ninja g++ c++ nvcc
  "$py" -c 'import sysconfig, os; p = sysconfig.get_paths()["include"]; print("Python.h:", p, os.path.exists(p + "/Python.h"))'
  "$py" -c 'import torch, transformers, deepspeed, pydantic; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__, "deepspeed", deepspeed.__version__, "pydantic", pydantic.__version__)'
} >>"$setup_log" 2>&1
cat "$setup_log"

# 2. JIT-build DeepSpeed's CPU Adam once, outside the timed runs' limits.  A
#    build killed half-way leaves torch's `lock` file behind, and the next load
#    then waits on it for ever: no build runs now, so remove any.
find "$TORCH_EXTENSIONS_DIR" -maxdepth 2 -name lock -delete 2>/dev/null
t0=$(date +%s)
if timeout -k 10 "${DS_BUILD_TIMEOUT:-240}" "$py" -c \
     'from deepspeed.ops.op_builder import CPUAdamBuilder; CPUAdamBuilder().load(); print("cpu_adam ready")' \
     >>"$setup_log" 2>&1; then
  echo "cpu_adam built/loaded in $(( $(date +%s) - t0 )) s"
else
  echo "cpu_adam JIT build FAILED (see $setup_log); the runs will fail too:"; tail -30 "$setup_log"
fi

# 3. The runs, one process each, each under a time limit (timeout signals the
#    whole process group, ZenFlow's optimizer process included; the driver
#    writes its JSON line on SIGTERM) and the driver's host-memory guard.
tmo_max=${DS_RUN_TIMEOUT:-170}
budget=${DS_BUDGET:-560}
jsonl=$out/deepspeed.jsonl
record_missing() {  # mode name status: a JSON line for a run that wrote none
  "$py" - "$jsonl" "$1" "$2" "$3" <<'EOF'
import json, sys, time
f, mode, name, status = sys.argv[1:]
with open(f, "a") as o:
    o.write(json.dumps({"system": "deepspeed_" + mode, "mode": mode, "model": name, "status": status,
                        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
EOF
}
for r in "${expanded[@]}"; do
  mode=${r%%:*}
  model=${r#*:}
  name=$(basename "$model")
  log=$out/ds_${mode}_${name}.log
  left=$(( budget - SECONDS - 15 ))
  if [ "$left" -lt 45 ]; then
    echo "== $mode $name: skipped, ${left}s of the budget left"
    record_missing "$mode" "$name" skipped_no_time
    continue
  fi
  tmo=$(( left < tmo_max ? left : tmo_max ))
  find "$TORCH_EXTENSIONS_DIR" -maxdepth 2 -name lock -delete 2>/dev/null  # left by a run killed mid-build
  echo "== $mode $name (timeout ${tmo}s) -> $log"
  # shellcheck disable=SC2086
  timeout -k 15 "$tmo" "$py" bench/deepspeed_offload.py --model "$model" --mode "$mode" \
    --batch "${DS_BATCH:-8}" --micro-batch "${DS_MICRO:-${DS_BATCH:-8}}" \
    --steps "${DS_STEPS:-12}" ${DS_WARMUP:+--warmup "$DS_WARMUP"} \
    --min-host-avail-gb "${DS_MIN_AVAIL_GB:-6}" --out "$jsonl" ${DS_EXTRA_ARGS:-} >"$log" 2>&1
  rc=$?
  grep -E '^(step|RESULT|deepspeed.initialize|model |host memory guard)' "$log" | tail -20
  if [ $rc -ne 0 ]; then
    echo "   exit $rc; last lines:"; tail -15 "$log" | sed 's/^/   | /'
    # A run killed with SIGKILL wrote no line: record it.
    if ! grep -q '^RESULT' "$log"; then record_missing "$mode" "$name" "no_result_exit_$rc"; fi
  fi
done

# 4. Summary table.
"$py" - "$jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def f(v, fmt):
    return "-" if v is None else format(v, fmt)
print()
print("| system | model | batch (micro) | status | steps | tokens/s (wall) | median step s | tokens/s (median) | max step s | GPU peak GB | host used peak GB |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        r.get("system"), r.get("model"), r.get("batch", "-"), r.get("micro_batch", "-"), r.get("status"),
        r.get("timed_steps_done", "-"), f(r.get("tokens_per_s_wall"), ",.0f"), f(r.get("median_step_s"), ".3f"),
        f(r.get("tokens_per_s_median"), ",.0f"), f(r.get("max_step_s"), ".3f"), f(r.get("gpu_peak_gb"), ".1f"), f(r.get("host_used_peak_gb"), ".1f")))
EOF
