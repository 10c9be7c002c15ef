#!/usr/bin/env bash
# PPO training throughput against the raw stepping ceiling on Brax ant and humanoid, on a GPU:
# 2,048 and 8,192 envs with one run, and 32 vmapped seeds of 256 envs each (8,192 envs in all),
# each measured by benchmarks/throughput.py (both sides compiled first, then timed in steady
# state) and merged into benchmarks/results/gpu.json. Bounded to 8 minutes in all: each
# configuration gets what is left of the budget, and one that does not fit is recorded as
# skipped rather than left out.
#
#   bash benchmarks/gpu.sh                      # on a machine with a GPU and jax[cuda] installed
#   GPU_SCALE=tiny bash benchmarks/gpu.sh       # a check of the script itself, on the CPU
#
# Environment: PYTHON (default: python), GPU_JSON (default benchmarks/results/gpu.json),
# GPU_BUDGET_S (default 480), GPU_SCALE (full | tiny), BACKEND (default generalized).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
OUT_JSON=${GPU_JSON:-benchmarks/results/gpu.json}
BUDGET=${GPU_BUDGET_S:-480}
BACKEND=${BACKEND:-generalized}
if [ "${GPU_SCALE:-full}" = tiny ]; then
  # env, envs per run, seeds, rollout, epochs, minibatches, iterations per chunk, chunks
  CONFIGS=("brax:ant 8 1 8 1 2 1 1" "brax:humanoid 8 1 8 1 2 1 1" "brax:ant 4 4 8 1 2 1 1")
else
  CONFIGS=("brax:ant 2048 1 16 4 32 2 2" "brax:humanoid 2048 1 16 4 32 2 2"
           "brax:ant 8192 1 16 4 32 2 2" "brax:ant 256 32 16 4 8 2 2"
           "brax:humanoid 8192 1 16 4 32 2 2")
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
START=$(date +%s)
"$PY" -c "import jax; print('pgjax gpu.sh:', jax.devices())"
i=0
for c in "${CONFIGS[@]}"; do
  read -r ENV N SEEDS LEN EPOCHS MB ITERS CHUNKS <<<"$c"
  LEFT=$(( BUDGET - ($(date +%s) - START) ))
  i=$((i + 1))
  if [ "$LEFT" -lt 30 ]; then
    echo "{\"skipped\": \"$ENV $N envs x $SEEDS seeds: no time left in the ${BUDGET}s budget\"}" \
      > "$TMP/$i.json"
    continue
  fi
  echo "== $ENV, $N envs x $SEEDS seeds (${LEFT}s left)"
  if ! timeout "$LEFT" "$PY" benchmarks/throughput.py --envs "$ENV" --num-envs "$N" \
      --seeds "$SEEDS" --rollout-len "$LEN" --epochs "$EPOCHS" --minibatches "$MB" \
      --iters "$ITERS" --chunks "$CHUNKS" --backend "$BACKEND" --json "$TMP/$i.json"; then
    echo "{\"skipped\": \"$ENV $N envs x $SEEDS seeds: stopped at the budget or failed\"}" \
      > "$TMP/$i.json"
  fi
done
"$PY" - "$TMP" "$OUT_JSON" "$BUDGET" "$START" <<'EOF'
import json, sys, time
from pathlib import Path
tmp, out, budget, start = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], float(sys.argv[4])
parts = [json.loads(p.read_text()) for p in sorted(tmp.glob("*.json"), key=lambda p: int(p.stem))]
merged = {"device": next((p["device"] for p in parts if "device" in p), None),
          "device_kind": next((p.get("device_kind") for p in parts if "device" in p), None),
          "jax": next((p.get("jax") for p in parts if "device" in p), None),
          "budget_s": int(budget), "elapsed_s": round(time.time() - start, 1),
          "results": [r for p in parts for r in p.get("results", [])],
          "skipped": [p["skipped"] for p in parts if "skipped" in p]}
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps(merged, indent=2))
for r in merged["results"]:
    print(f"{r['env']:14s} {r['num_envs']:>5} envs x {r['seeds']:>2} seeds: raw "
          f"{r['raw_steps_per_s']:>12,.0f} steps/s, PPO {r['ppo_steps_per_s']:>12,.0f} steps/s,"
          f" ratio {r['ratio']:.3f}")
for s in merged["skipped"]:
    print("skipped:", s)
print(f"written to {out} ({merged['elapsed_s']} s)")
EOF
