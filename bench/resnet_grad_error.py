#!/usr/bin/env python3
"""How far each convolution algorithm's ResNet-18 gradient lands from exact sums, and why.

Reads what build/resnet_grad_dump wrote (the PJRT parity test's ResNet-18, batch 8: weights, input, labels
and one training-mode gradient per algorithm) and holds every gradient against the same step in fp64
(torchvision's resnet18 with those weights), by the parity test's two measures: the whole gradient's
max |g - ref| / max |ref| and each tensor's.

Then it asks whether the errors come from the ReLUs' kinks: it runs the fp64 step again with noise of a
given size (relative to each convolution output's largest value) added to every convolution's output,
once with the ReLUs free (an input that crosses 0 flips its mask) and once with their masks frozen to the
clean step's. If the gradient moves by percents only when the masks are free, the bound is broken by
inputs within rounding of a kink, not by the algorithm's error as such.

  /usr/bin/python3 bench/resnet_grad_error.py FILE [--noise 4e-7,3e-6] [--trials 3]
  /usr/bin/python3 bench/resnet_grad_error.py FILE --scan 1-100
(Debian's PyTorch and torchvision; no safetensors package needed.)

--scan: with FILE's weights, the input seeds (resnet_grad_dump --input-seed) whose fp64 forward pass keeps
the ReLU inputs of the stages of at most 16 pixels per map farthest from the kink (the smallest |v| over
the tensor's largest |v|), best first, as tests/fixtures/make_zoo_parity_fixtures.py picks its batch.
"""
import argparse
import json
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.models as tvm


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dtypes = {"F32": np.float32, "I32": np.int32, "U8": np.uint8}
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=dtypes[v["dtype"]]).reshape(v["shape"])
    return out


class KinkReLU(nn.Module):
    """ReLU that records each call's input; with `frozen` set, applies the masks of a recorded run instead."""

    def __init__(self, log):
        super().__init__()
        self.log = log

    def forward(self, x):
        i = len(self.log["inputs"])
        self.log["inputs"].append(x.detach())
        if self.log["frozen"] is not None:
            return x * (self.log["frozen"][i] > 0).to(x.dtype)
        return F.relu(x)


def build(tensors, log):
    model = tvm.resnet18(num_classes=5).double()
    with torch.no_grad():
        for n, t in list(model.named_parameters()) + list(model.named_buffers()):
            if n in tensors:
                t.copy_(torch.from_numpy(tensors[n].astype(np.float64)).reshape(t.shape))
    model.relu = KinkReLU(log)
    for layer in (model.layer1, model.layer2, model.layer3, model.layer4):
        for block in layer:
            block.relu = KinkReLU(log)
    return model.train()


def step(tensors, noise=0.0, frozen=None, seed=0):
    """One fp64 training-mode gradient; noise: N(0, (noise * max|out|)^2) added to each conv output."""
    log = {"inputs": [], "frozen": frozen}
    model = build(tensors, log)
    gen = torch.Generator().manual_seed(seed)
    if noise:
        def add_noise(module, inputs, out):
            return out + noise * out.detach().abs().max() * torch.randn(out.shape, generator=gen, dtype=out.dtype)
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                m.register_forward_hook(add_noise)
    x = torch.from_numpy(tensors["input"].astype(np.float64))
    y = torch.from_numpy(tensors["labels"].astype(np.int64))
    logits = model(x)
    F.cross_entropy(logits, y).backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    grads["logits"] = logits.detach()  # not a gradient: compared the same way
    return grads, log["inputs"]


def errors(got, ref):
    """(the whole gradient's relative error, {tensor: its own relative error})."""
    diff = max((got[n] - ref[n]).abs().max().item() for n in ref)
    scale = max(ref[n].abs().max().item() for n in ref)
    per = {n: (got[n] - ref[n]).abs().max().item() / max(ref[n].abs().max().item(), 1e-30) for n in ref}
    return diff / scale, per


def convoy_uniform(seed, count, lo=-1.0, hi=1.0):
    """convoy's Rng(seed).uniform(lo, hi), count times (SplitMix64, 24 bits; core/rng.h)."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + np.arange(1, count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    return np.float32(lo) + np.float32(hi - lo) * u


def late_kink_margin(tensors, seed):
    """The smallest |v| / max |v| over the ReLU inputs of maps of at most 16 pixels, for input seed `seed`."""
    log = {"inputs": [], "frozen": None}
    model = build(tensors, log)
    shape = tensors["input"].shape
    x = torch.from_numpy(convoy_uniform(seed, int(np.prod(shape))).astype(np.float64).reshape(shape))
    with torch.no_grad():
        model(x)
    late = [v for v in log["inputs"] if v.shape[2] * v.shape[3] <= 16]
    return min((v.abs().min() / v.abs().max()).item() for v in late)


def load(tensors, algo, ref):
    """Algorithm `algo`'s gradients and logits from the dump, in fp64."""
    out = {n: torch.from_numpy(tensors[f"grad.{algo}.{n}"].astype(np.float64)) for n in ref if n != "logits"}
    out["logits"] = torch.from_numpy(tensors[f"logits.{algo}"].astype(np.float64))
    return out


def summary(label, got, ref, top=3):
    whole, per = errors(got, ref)
    worst = sorted(per.items(), key=lambda kv: -kv[1])[:top]
    over = sum(1 for v in per.values() if v >= 2e-3)
    print(f"{label:34s} whole {whole:8.2e}  tensors >= 2e-3: {over:2d}  worst: "
          + ", ".join(f"{n} {v:.1e}" for n, v in worst))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--noise", default="4e-7,3e-6")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--scan", help="input seeds FIRST-LAST to rank by their late ReLU inputs' distance from 0")
    args = ap.parse_args()
    t = read_safetensors(args.file)
    if args.scan:
        first, last = map(int, args.scan.split("-"))
        ranked = sorted(((late_kink_margin(t, s), s) for s in range(first, last + 1)), reverse=True)
        print("seed  smallest late |v| / max |v|")
        for margin, s in ranked[:10]:
            print(f"{s:4d}  {margin:.1e}")
        return
    ref, relu_inputs = step(t)
    without_logits = {n: g for n, g in ref.items() if n != "logits"}

    algos = sorted({k.split(".")[1] for k in t if k.startswith("grad.")})
    for algo in algos:
        got = load(t, algo, ref)
        logits = errors({"logits": got.pop("logits")}, {"logits": ref["logits"]})[0]
        summary(f"{algo} vs fp64 (logits {logits:.1e})", got, without_logits)
    if "pjrt" in algos:
        pj = load(t, "pjrt", ref)
        pj.pop("logits")
        for algo in algos:
            if algo != "pjrt":
                got = load(t, algo, ref)
                got.pop("logits")
                summary(f"{algo} vs pjrt (the test)", got, pj)

    # How close the ReLU inputs come to their kink: the smallest |v| over the tensor's largest |v|.
    near = [(v.abs().min() / v.abs().max()).item() for v in relu_inputs]
    print("ReLU inputs: smallest |v| / max |v| per call: " + " ".join(f"{m:.0e}" for m in near))

    for r in [float(s) for s in args.noise.split(",") if s]:
        for trial in range(args.trials):
            free, inputs = step(t, noise=r, seed=trial)
            flips = sum(int(((a > 0) != (b > 0)).sum()) for a, b in zip(inputs, relu_inputs))
            frozen, _ = step(t, noise=r, frozen=relu_inputs, seed=trial)
            free.pop("logits"), frozen.pop("logits")
            summary(f"noise {r:.0e} #{trial}, free ({flips} flips)", free, without_logits)
            summary(f"noise {r:.0e} #{trial}, masks frozen", frozen, without_logits)


if __name__ == "__main__":
    main()
