#!/usr/bin/env python3
"""The seed CNN (seeds/002) trained in PyTorch exactly as convoy trains it:
same data files and normalisation, batch, SGD(lr, momentum), NLL loss, a
reshuffle per epoch with the remainder dropped, evaluation on the full test set
after each epoch. Prints one JSON object like convoy's summary.json.

  /usr/bin/python3 bench/pytorch_seed_cnn.py --epochs 2 --threads 2
"""
import argparse
import contextlib
import json
import os
import sys
import time

from fashion_idx import read_idx  # bench/ is on sys.path: the script's folder

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from make_parity_fixtures import SeedCNN  # noqa: E402  (one definition of the network)


def load(data_dir, split):
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    x = (torch.from_numpy(images.astype(np.float32) / 255.0) - 0.1307) / 0.3081
    return x.unsqueeze(1).contiguous(), torch.from_numpy(labels.astype(np.int64))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-subset", type=int, default=0)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    x_train, y_train = load(a.data, "train")
    x_test, y_test = load(a.data, "t10k")
    if a.train_subset:
        x_train, y_train = x_train[: a.train_subset], y_train[: a.train_subset]
    model = SeedCNN()

    def precision():
        if a.precision == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    n, b = len(y_train), a.batch_size
    seconds, history = [], []
    fit_start = time.perf_counter()
    for epoch in range(1, a.epochs + 1):
        model.train()
        start = time.perf_counter()
        order = torch.randperm(n)
        for i in range(n // b):
            idx = order[i * b: (i + 1) * b]
            opt.zero_grad()
            with precision():
                loss = F.nll_loss(model(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
        seconds.append(time.perf_counter() - start)
        model.eval()
        correct, loss = 0, 0.0
        with torch.no_grad(), precision():
            for i in range(0, len(y_test), 1000):
                out = model(x_test[i: i + 1000]).float()
                loss += F.nll_loss(out, y_test[i: i + 1000], reduction="sum").item()
                correct += (out.argmax(1) == y_test[i: i + 1000]).sum().item()
        history.append({"epoch": epoch, "test_accuracy": correct / len(y_test), "test_loss": loss / len(y_test),
                        "train_seconds": seconds[-1]})
        print(f"pytorch epoch {epoch}: {seconds[-1]:.2f} s, test_acc {100 * correct / len(y_test):.2f}%",
              file=sys.stderr)
    print(json.dumps({"device": "cpu", "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "precision": a.precision,
                      "epochs": a.epochs, "batch_size": b, "epoch_seconds": seconds,
                      "total_train_seconds": time.perf_counter() - fit_start,
                      "images_per_second": (n // b) * b * a.epochs / sum(seconds),
                      "test_accuracy": history[-1]["test_accuracy"], "test_loss": history[-1]["test_loss"],
                      "history": history}))


if __name__ == "__main__":
    main()
