#!/usr/bin/env python3
"""The PyTorch side of bench/resnet_vs_pytorch.py: a torchvision model
trained on random data, as bench/train_steps_convoy.cpp does — random images
and labels, SGD with momentum 0.9, cross-entropy, `--warmup` untimed steps,
then `--steps` timed ones. Prints one JSON line like the convoy side.
--precision bf16: the forward pass (and so its backward) under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's mixed precision:
convolutions and linear layers in bf16, fp32 master weights and optimizer,
as convoy's --precision bf16.

  .peers/torch/bin/python bench/pytorch_train_steps.py --model resnet18 --size 64 --batch 64 --threads 2
                                                       [--precision bf16]
"""
import argparse
import contextlib
import json
import time

import torch
import torch.nn.functional as F
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(7)
    model = getattr(torchvision.models, a.model)(num_classes=a.classes)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(a.batch, 3, a.size, a.size) * 2 - 1
    y = torch.randint(0, a.classes, (a.batch,))

    def precision():
        if a.precision == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step():
        opt.zero_grad()
        with precision():
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    seconds = []
    cpu0 = time.process_time()
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - t0)
    # As the convoy side's: the process's CPU time over the timed steps (on one
    # thread, a figure other processes on a busy machine barely disturb).
    cpu = (time.process_time() - cpu0) / a.steps
    print(json.dumps({"model": a.model, "precision": a.precision, "batch": a.batch, "torch": torch.__version__,
                      "images_per_second": a.batch * a.steps / sum(seconds), "cpu_seconds_per_step": cpu,
                      "step_seconds": seconds}))


if __name__ == "__main__":
    main()
