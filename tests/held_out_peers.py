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
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures"))
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
        top, bottom = same_pads(int(x.shape[2]), kernel, stride)  # constants in a traced export
        left, right = same_pads(int(x.shape[3]), kernel, stride)
    else:
        top = bottom = left = right = padding
    return F.pad(x, (left, right, top, bottom), value=value)


def torch_forward(layers, weights, x):
    """The model's inference output, layer by layer, named as convoy names them."""
    def tensor(v):
        return v if torch.is_tensor(v) else torch.from_numpy(v.copy())

    t = {k: tensor(v) for k, v in weights.items()}
    outputs = {"input": tensor(x)}
    counts, last = {}, "input"
    for item in layers:
        item = {"type": item} if isinstance(item, str) else item
        kind = item["type"]
        name = f"{kind}_{counts.get(kind, 0)}"
        counts[kind] = counts.get(kind, 0) + 1
        ins = [outputs[i] for i in item.get("inputs", [last])]
        h = ins[0]
        # Whole-number padding as PyTorch code writes it; "same" (TensorFlow's,
        # asymmetric) as an explicit pad first, as ports of TensorFlow models do.
        if kind == "conv2d":
            k, s, p = item["kernel"], item.get("stride", 1), item.get("padding", 0)
            if p == "same":
                h, p = padded(h, k, s, p), 0
            h = F.conv2d(h, t[name + ".weight"], t.get(name + ".bias"), stride=s, padding=p, groups=item.get("groups", 1))
        elif kind == "max_pool2d":
            k, p = item["kernel"], item.get("padding", 0)
            s = item.get("stride", 0) or k
            if p == "same":
                h, p = padded(h, k, s, p, float("-inf")), 0
            h = F.max_pool2d(h, k, s, padding=p)
        elif kind == "avg_pool2d":
            k, p = item["kernel"], item.get("padding", 0)
            s = item.get("stride", 0) or k
            if p != "same":
                h = F.avg_pool2d(h, k, s, padding=p, count_include_pad=item.get("count_include_pad", True))
            elif item.get("count_include_pad", True):
                h = F.avg_pool2d(padded(h, k, s, p), k, s)
            else:  # the mean over the pixels inside the image
                ones = torch.ones_like(h[:1, :1])
                h = F.avg_pool2d(padded(h, k, s, p), k, s) / F.avg_pool2d(padded(ones, k, s, p), k, s)
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
    return outputs[last]


def check_torch_exports(tests, tmp, models):
    """Each model as PyTorch runs it, exported by torch.onnx.export (opset 13),
    imports into convoy with PyTorch's outputs (test_onnx.cpp's OnnxTorchExports)."""
    from make_parity_fixtures import write_safetensors

    class Held(torch.nn.Module):
        def __init__(self, layers, weights):
            super().__init__()
            self.layers = layers
            for k, v in weights.items():
                self.register_buffer(k.replace(".", "__"), torch.from_numpy(v.copy()))

        def forward(self, x):
            weights = {k.replace("__", "."): v for k, v in self.named_buffers()}
            return torch_forward(self.layers, weights, x)

    failures = 0
    for m in models:
        if any(isinstance(l, dict) and l["type"] == "avg_pool2d" and l.get("padding") == "same"
               and not l.get("count_include_pad", True) for l in m["layers"]):
            # TensorFlow's mean over the pixels inside the image has no PyTorch op.
            print(f"torch.onnx.export -> convoy: {m['name']}: skipped (a \"same\" average pool without the padding)")
            continue
        case = read_safetensors(os.path.join(tmp, m["name"] + ".safetensors"))
        x = torch.from_numpy(case.pop("case.input").copy())
        case.pop("case.output")
        model = Held(m["layers"], case).eval()
        folder = os.path.join(tmp, "torch_" + m["name"])
        os.makedirs(folder)
        path = os.path.join(folder, m["name"])
        with torch.no_grad():
            torch.onnx.export(model, x, path + ".onnx", opset_version=13, input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "n"}, "output": {0: "n"}})
            write_safetensors(path + ".safetensors", {"input": x, "logits": model(x)})
        env = dict(os.environ, CONVOY_ONNX_TORCH_DIR=folder)
        run = subprocess.run([tests, "--gtest_filter=OnnxTorchExports.*"], env=env, capture_output=True, text=True)
        said = [line for line in run.stdout.splitlines() if "figures" in line or "exception" in line or "Failure" in line]
        failures += run.returncode != 0
        print(f"torch.onnx.export -> convoy: {m['name']}: " + ("; ".join(said) if said else "")
              + ("" if run.returncode == 0 else "  FAIL"))
    return failures


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
                    got["torch " + torch.__version__] = torch_forward(m["layers"], case, x).numpy()
            scale = max(float(np.abs(want).max()), 1.0)
            for peer, out in got.items():
                diff = float(np.abs(out - want).max()) if out.shape == want.shape else float("inf")
                ok = diff <= 1e-4 * scale
                failures += not ok
                print(f"{m['name']} {m['input']} in {peer}: max |output diff| {diff:.2e}{'' if ok else '  FAIL'}")
                if not ok:
                    print("  layers: " + json.dumps(m["layers"]))
        if torch is not None:
            failures += check_torch_exports(tests, tmp, models)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
