#!/usr/bin/env bash
# The seed CNN's seconds per epoch on this machine's CPU, three ways in one
# run: convoy's own CPU backend, convoy's PJRT backend on XLA's CPU plugin
# (docs/accelerators.md), and PyTorch (Debian's, bench/pytorch_seed_cnn.py).
# Same data, batch 128, SGD lr 0.01 momentum 0.5, EPOCHS epochs each, one
# after the other. Prints one table row per runner (median s/epoch of the
# epochs after the first, which holds XLA's compilation, and the last test
# accuracy).
#
#   bash bench/pjrt_seed_cnn.sh [build/convoy] [EPOCHS]
set -euo pipefail
cd "$(dirname "$0")/.."
convoy="${1:-build/convoy}"
epochs="${2:-3}"
data="${CONVOY_DATA:-/usr/share/datasets/fashion-mnist}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for device in cpu pjrt; do
  "$convoy" train --device "$device" --data "$data" --epochs "$epochs" --progress quiet --out "$work/$device" >/dev/null
done
/usr/bin/python3 bench/pytorch_seed_cnn.py --epochs "$epochs" --data "$data" >"$work/torch.json" 2>/dev/null
python3 - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
def row(name, path):
    d = json.load(open(path))
    s = d["epoch_seconds"]
    steady = s[1:] if len(s) > 1 else s
    print(f"| {name} | {d.get('device', 'cpu')} | {statistics.median(steady):.2f} | {s[0]:.2f} | {100 * d['test_accuracy']:.2f}% |")
print("| runner | device | s/epoch (median, epochs 2+) | first epoch s | test acc |")
print("|---|---|---|---|---|")
row("convoy", f"{work}/cpu/summary.json")
row("convoy PJRT (XLA CPU plugin)", f"{work}/pjrt/summary.json")
row("PyTorch (Debian)", f"{work}/torch.json")
PY
