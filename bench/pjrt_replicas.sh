#!/usr/bin/env bash
# The seed article's 8-core layout on one CPU: the seed CNN trained with
# `--device pjrt --replicas 8 --scale-lr` (8 replicas in one XLA program on
# XLA's CPU plugin, batch 128 each, global batch 1024, SGD lr 0.01 x 8
# momentum 0.5), batch norm per replica and, with SYNC=1, synchronised.
# Prints one table row per run: median s/epoch (epochs 2+; the first holds
# XLA's compilation), the first epoch's seconds, the final test accuracy.
# The one-process figures to compare with: bench/pjrt_seed_cnn.sh.
#
#   bash bench/pjrt_replicas.sh [build/convoy] [EPOCHS]
set -euo pipefail
cd "$(dirname "$0")/.."
convoy="${1:-build/convoy}"
epochs="${2:-15}"
data="${CONVOY_DATA:-/usr/share/datasets/fashion-mnist}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

runs=(per_replica)
[[ "${SYNC:-0}" == 1 ]] && runs+=(synchronised)
for run in "${runs[@]}"; do
  flags=()
  [[ $run == synchronised ]] && flags+=(--sync-bn)
  "$convoy" train --device pjrt --replicas 8 --scale-lr "${flags[@]}" --data "$data" --epochs "$epochs" \
    --progress quiet --out "$work/$run" >/dev/null 2>&1
done
python3 - "$work" "${runs[@]}" <<'PY'
import json, statistics, sys
work = sys.argv[1]
print("| run | batch norm | s/epoch (median, epochs 2+) | first epoch s | epochs | test acc |")
print("|---|---|---|---|---|---|")
for run in sys.argv[2:]:
    d = json.load(open(f"{work}/{run}/summary.json"))
    s = d["epoch_seconds"]
    steady = s[1:] if len(s) > 1 else s
    print(f"| {d['device']} x{d['replicas']} | {run.replace('_', ' ')} | {statistics.median(steady):.2f} | "
          f"{s[0]:.2f} | {len(s)} | {100 * d['test_accuracy']:.2f}% |")
PY
