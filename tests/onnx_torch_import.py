#!/usr/bin/python3
"""torchvision's ResNet-18 and MobileNetV2, exported to ONNX by
torch.onnx.export (opset 13, inference mode: batch norms folded into the
convolutions), import into convoy and give PyTorch's logits; so does a small
CNN flattening with x.view(x.size(0), -1), exported with a free and a fixed
batch size, and one of constant operands and reshapes (issue 23: an input
normalised by per-channel constants, a bias and a scale added to a
convolution, a reshape that keeps the batch, a Linear scaled and shifted),
exported with PyTorch's constant folding and without it.

The files are made here at test time rather than committed (ResNet-18 is
45 MB): seeded weights (torch.manual_seed; batch-norm statistics randomised
so they matter), 10 classes, a batch of 2 images of 3x64x64; then
tests/test_onnx.cpp's OnnxTorchExports case imports each and compares.

  /usr/bin/python3 tests/onnx_torch_import.py build/convoy_tests
Exit 77 (ctest: skipped) without PyTorch and torchvision (Debian's python3-torch, python3-torchvision).
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures"))

try:
    import torch
    import torchvision
except ImportError:
    print("onnx_torch_import: PyTorch or torchvision is missing; skipped")
    sys.exit(77)

from make_parity_fixtures import write_safetensors  # noqa: E402


def randomize_batch_norms(model, gen):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.weight.data.uniform_(0.5, 1.5, generator=gen)
            m.bias.data.uniform_(-0.2, 0.2, generator=gen)
            m.running_mean.uniform_(-0.2, 0.2, generator=gen)
            m.running_var.uniform_(0.5, 1.5, generator=gen)


class ViewNet(torch.nn.Module):
    """A CNN whose flatten is x.view(x.size(0), -1): exported with a free batch
    size it becomes Shape, Gather, Unsqueeze, Concat and Reshape; with a fixed
    one, a Reshape to [2, 72]."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 2, 3)
        self.bn = torch.nn.BatchNorm2d(2)
        self.fc = torch.nn.Linear(2 * 6 * 6, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(x.view(x.size(0), -1))


class ConstantsNet(torch.nn.Module):
    """(x - mean) / std per channel, a bias-free conv plus a per-channel bias
    times 0.5, x.reshape(N, 2, -1) through a sigmoid, then flatten(1), and a
    Linear whose logits are scaled and shifted by constants."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
        self.conv = torch.nn.Conv2d(3, 2, 3, bias=False)
        self.bias = torch.nn.Parameter(torch.randn(2))
        self.fc = torch.nn.Linear(2 * 6 * 6, 10)
        self.register_buffer("offset", torch.randn(10))

    def forward(self, x):
        x = (x - self.mean) / self.std
        x = (self.conv(x) + self.bias.view(1, -1, 1, 1)) * 0.5
        x = torch.sigmoid(x.reshape(x.size(0), 2, -1)).flatten(1)
        return self.fc(x) * 2.0 - self.offset


def main():
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(7)
        view = ViewNet().eval()
        randomize_batch_norms(view, torch.Generator().manual_seed(8))
        x = torch.randn(2, 3, 8, 8)
        for name, axes in [("view_free_batch", {"input": {0: "N"}, "logits": {0: "N"}}), ("view_fixed_batch", None)]:
            torch.onnx.export(view, x, os.path.join(tmp, name + ".onnx"), opset_version=13, input_names=["input"],
                              output_names=["logits"], dynamic_axes=axes)
            with torch.no_grad():
                write_safetensors(os.path.join(tmp, name + ".safetensors"), {"input": x, "logits": view(x)})
        constants = ConstantsNet().eval()
        for name, folding in [("constants_folded", True), ("constants_unfolded", False)]:
            torch.onnx.export(constants, x, os.path.join(tmp, name + ".onnx"), opset_version=13, input_names=["input"],
                              output_names=["logits"], dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
                              do_constant_folding=folding)
            with torch.no_grad():
                write_safetensors(os.path.join(tmp, name + ".safetensors"), {"input": x, "logits": constants(x)})
        for i, name in enumerate(["resnet18", "mobilenet_v2"]):
            torch.manual_seed(i)
            model = getattr(torchvision.models, name)(num_classes=10).eval()
            randomize_batch_norms(model, torch.Generator().manual_seed(100 + i))
            x = torch.randn(2, 3, 64, 64)
            torch.onnx.export(model, x, os.path.join(tmp, name + ".onnx"), opset_version=13,
                              input_names=["input"], output_names=["logits"])
            with torch.no_grad():
                write_safetensors(os.path.join(tmp, name + ".safetensors"), {"input": x, "logits": model(x)})
        env = dict(os.environ, CONVOY_ONNX_TORCH_DIR=tmp)
        return subprocess.run([sys.argv[1], "--gtest_filter=OnnxTorchExports.*"], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
