#!/usr/bin/env bash
# The benchmarks' pip peers that setup.sh does not install (they are large
# and no test needs them): pip's current PyTorch (CPU use; the wheel brings
# CUDA libraries, ~5 GB) with torchvision, in a virtual environment of its
# own, .peers/torch, so it never shadows Debian's PyTorch 1.13 (the parity
# fixtures' oracle). TensorFlow comes from setup.sh.
#   bash bench/setup_peers.sh        # then: python3 bench/seed_cnn_vs_peers.py
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.peers/torch
if [[ ! -x $venv/bin/python ]] || ! $venv/bin/python -c "import torch, torchvision, numpy" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch torchvision numpy
fi
"$venv/bin/python" -c "import torch; print('bench peers: pip torch', torch.__version__, 'in', '$venv')"
