#!/usr/bin/env python3
"""Held-out models (tests/held_out_models.h) in real clients: ONNX Runtime
runs convoy's ONNX export of each, and PyTorch computes each model from its
layers (models.json) and the weights convoy wrote as safetensors; both must
give convoy's inference outputs. tests/test_held_out_models.cpp's
HeldOutModelCases writes the files.

  python3 tests/held_out_peers.py build/tests/convoy_tests
Checks whichever of onnxruntime and torch this Python has; exit 77 (ctest:
skipped) when it has neither (CMake runs it with .peers/py, which has
onnxruntime, and with /usr/bin/python3, which has Debian's python3-torch).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_peers import np, onnxruntime, read_safetensors  # noqa: E402 (exits 77 without numpy)

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None


def same_pads(size, kernel, stride):
    """convoy's (TensorFlow's) "same": the odd pixel of padding goes at the end."""
    out = (size + stride - 1) // stride
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def padded(x, kernel, stride, padding, value=0.0):
    """x padded as the layer pads it, then pooled or convolved with padding 0."""
    if padding == "same":
        top, bottom = same_pads(x.shape[2], kernel, stride)
        left, right = same_pads(x.shape[3], kernel, stride)
    else:
        top = bottom = left = right = padding
    return F.pad(x, (left, right, top, bottom), value=value)


def torch_forward(layers, weights, x):
    """The model's inference output, layer by layer, named as convoy names them."""
    t = {k: torch.from_numpy(v.copy()) for k, v in weights.items()}
    outputs = {"input": torch.from_numpy(x.copy())}
    counts, last = {}, "input"
    for item in layers:
        item = {"type": item} if isinstance(item, str) else item
        kind = item["type"]
        name = f"{kind}_{counts.get(kind, 0)}"
        counts[kind] = counts.get(kind, 0) + 1
        ins = [outputs[i] for i in item.get("inputs", [last])]
        h = ins[0]
        if kind == "conv2d":
            k, s = item["kernel"], item.get("stride", 1)
            h = F.conv2d(padded(h, k, s, item.get("padding", 0)), t[name + ".weight"], t.get(name + ".bias"),
                         stride=s, groups=item.get("groups", 1))
        elif kind == "max_pool2d":
            k = item["kernel"]
            s = item.get("stride", 0) or k
            h = F.max_pool2d(padded(h, k, s, item.get("padding", 0), float("-inf")), k, s)
        elif kind == "avg_pool2d":
            k = item["kernel"]
            s = item.get("stride", 0) or k
            p = item.get("padding", 0)
            total = F.avg_pool2d(padded(h, k, s, p), k, s) * (k * k)
            if item.get("count_include_pad", True):
                h = total / (k * k)
            else:
                ones = torch.ones_like(h[:1, :1])
                h = total / (F.avg_pool2d(padded(ones, k, s, p), k, s) * (k * k))
        elif kind == "global_avg_pool":
            h = h.mean(dim=(2, 3), keepdim=item.get("keep_dims", False))
        elif kind == "batch_norm":
            shape = [1, -1] + [1] * (h.dim() - 2)
            mean, var = t[name + ".running_mean"].view(shape), t[name + ".running_var"].view(shape)
            h = (h - mean) / torch.sqrt(var + item.get("eps", 1e-5)) * t[name + ".weight"].view(shape) \
                + t[name + ".bias"].view(shape)
        elif kind == "dropout":
            pass
        elif kind == "relu":
            h = F.relu(h)
        elif kind == "relu6":
            h = torch.clamp(h, 0, 6)
        elif kind == "silu":
            h = F.silu(h)
        elif kind == "sigmoid":
            h = torch.sigmoid(h)
        elif kind == "clip":
            h = torch.clamp(h, item.get("min"), item.get("max"))
        elif kind == "affine":
            h = h * t[name + ".weight"] + t[name + ".bias"]
        elif kind == "flatten":
            h = torch.flatten(h, 1)
        elif kind == "dense":
            h = F.linear(h, t[name + ".weight"], t[name + ".bias"])
        elif kind == "log_softmax":
            h = F.log_softmax(h, dim=1)
        elif kind == "add":
            h = sum(ins[1:], ins[0])
        elif kind == "concat":
            h = torch.cat(ins, dim=1)
        elif kind == "multiply":
            gate = ins[1]
            if h.dim() == 4 and gate.dim() == 2:
                gate = gate.view(gate.shape[0], -1, 1, 1)
            h = h * gate
        else:
            raise ValueError(f"{name}: no PyTorch rule for layer type {kind}")
        outputs[name] = h
        last = name
    return outputs[last].numpy()


def main():
    if onnxruntime is None and torch is None:
        print("held_out_peers: neither onnxruntime nor torch is installed; skipped")
        return 77
    tests = sys.argv[1]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CONVOY_HELD_OUT_DIR=tmp, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
        env.pop("CONVOY_HELD_OUT_DATA", None)
        subprocess.run([tests, "--gtest_filter=HeldOutModelCases.Write"], env=env, check=True, stdout=subprocess.DEVNULL)
        models = json.load(open(os.path.join(tmp, "models.json")))["valid"]
        for m in models:
            case = read_safetensors(os.path.join(tmp, m["name"] + ".safetensors"))
            x, want = case.pop("case.input"), case.pop("case.output")
            got = {}
            if onnxruntime is not None:
                session = onnxruntime.InferenceSession(os.path.join(tmp, m["name"] + ".onnx"),
                                                       providers=["CPUExecutionProvider"])
                got["onnxruntime " + onnxruntime.__version__] = session.run(None, {"input": x})[0]
            if torch is not None:
                with torch.no_grad():
                    got["torch " + torch.__version__] = torch_forward(m["layers"], case, x)
            scale = max(float(np.abs(want).max()), 1.0)
            for peer, out in got.items():
                diff = float(np.abs(out - want).max()) if out.shape == want.shape else float("inf")
                ok = diff <= 1e-4 * scale
                failures += not ok
                print(f"{m['name']} {m['input']} in {peer}: max |output diff| {diff:.2e}{'' if ok else '  FAIL'}")
                if not ok:
                    print("  layers: " + json.dumps(m["layers"]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
