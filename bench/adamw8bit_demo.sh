#!/usr/bin/env bash
# adamw8bit against adamw on assets/demo/gsm8k.yaml (issue 18; the demo
# until it became the addition task), same seed and data: as shipped (60
# steps) and the same config for 300 steps (the cosine schedule stretched
# over them, lr 3e-3 as shipped). Prints,
# per run, the mean loss of the last 5 steps (metrics.jsonl), the 8-bit
# run's difference from adamw, and the worst loss and its step.
# Usage: bench/adamw8bit_demo.sh OUT_DIR [STEPS...]   (default: 60 300)
# Env: LAZYTRAIN = the program (default build/lazytrain).
set -euo pipefail
out=${1:?usage: bench/adamw8bit_demo.sh OUT_DIR [STEPS...]}
shift
lengths=("$@")
[ ${#lengths[@]} -eq 0 ] && lengths=(60 300)
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${LAZYTRAIN:-$root/build/lazytrain}
mkdir -p "$out"
for steps in "${lengths[@]}"; do
  for optim in adamw adamw8bit; do
    dir=$out/$optim-$steps
    rm -rf "$dir"
    start=$(date +%s)
    "$bin" train "$root/assets/demo/gsm8k.yaml" --no-sample --set optim.name=$optim \
      --set train.steps=$steps --set train.save_every=0 --set out.dir="$dir" > "$out/$optim-$steps.log" 2>&1
    echo "$optim, $steps steps: $(($(date +%s) - start)) s"
  done
  python3 - "$out/adamw-$steps" "$out/adamw8bit-$steps" <<'PY'
import json, sys
def losses(d):
    with open(d + "/metrics.jsonl") as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
last5 = lambda x: sum(x[-5:]) / 5
print(f"steps {len(a)}: last-5 mean adamw {last5(a):.4f}, adamw8bit {last5(b):.4f} "
      f"({100 * (last5(b) / last5(a) - 1):+.2f}%)")
for name, x in (("adamw", a), ("adamw8bit", b)):
    worst = max(x)
    late = max(x[10:])
    print(f"  {name}: worst {worst:.3f} at step {x.index(worst)}, "
          f"worst after step 10 {late:.3f} at step {x.index(late, 10)}")
PY
done
