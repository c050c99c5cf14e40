#!/usr/bin/env python3
"""The seed CNN (seeds/002) trained by PyTorch on a CUDA GPU the way convoy
trains it there: 50 epochs of batch 128, SGD(lr 0.01, momentum 0.5), NLL loss,
a reshuffle per epoch with the remainder dropped, the full test set evaluated
after every epoch. The data sits on the GPU from the start (the fastest eager
setup: no loader in the loop). --mode compile wraps the model in
torch.compile; its first epoch includes the compilation, reported apart.

Prints one JSON object; {"skipped": why} when torch or CUDA is missing.

  python3 bench/gpu_seed_cnn_torch.py --mode eager --data DIR
"""
import argparse
import json
import os
import sys
import time

from fashion_idx import read_idx  # bench/, beside this script

START = time.perf_counter()


def idx_path(data_dir, name):
    for candidate in (name + ".gz", name):
        if os.path.exists(os.path.join(data_dir, candidate)):
            return os.path.join(data_dir, candidate)
    sys.exit(f"{data_dir}: no {name}[.gz]; pass --data DIR with the Fashion-MNIST IDX files")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(json.dumps({"skipped": f"no PyTorch/numpy here ({e})"}))
        return
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": f"torch {torch.__version__} sees no CUDA GPU"}))
        return
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
    from make_parity_fixtures import SeedCNN  # one definition of the network

    dev = torch.device("cuda")
    torch.manual_seed(a.seed)

    def load(split):
        images = read_idx(idx_path(a.data, f"{split}-images-idx3-ubyte"))
        labels = read_idx(idx_path(a.data, f"{split}-labels-idx1-ubyte"))
        x = (torch.from_numpy(images.astype(np.float32) / 255.0) - 0.1307) / 0.3081
        return x.unsqueeze(1).contiguous().to(dev), torch.from_numpy(labels.astype(np.int64)).to(dev)

    x_train, y_train = load("train")
    x_test, y_test = load("t10k")
    model = SeedCNN().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    step_model = torch.compile(model) if a.mode == "compile" else model
    n, b = len(y_train), a.batch_size
    seconds, history = [], []
    torch.cuda.synchronize()
    fit_start = time.perf_counter()
    for epoch in range(1, a.epochs + 1):
        model.train()
        start = time.perf_counter()
        order = torch.randperm(n, device=dev)
        for i in range(n // b):
            idx = order[i * b: (i + 1) * b]
            opt.zero_grad(set_to_none=True)
            F.nll_loss(step_model(x_train[idx]), y_train[idx]).backward()
            opt.step()
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
        model.eval()
        correct = torch.zeros((), device=dev, dtype=torch.int64)
        loss = torch.zeros((), device=dev)
        with torch.no_grad():  # the same batches as convoy's evaluation
            for i in range(0, len(y_test), b):
                out = step_model(x_test[i: i + b])
                loss += F.nll_loss(out, y_test[i: i + b], reduction="sum")
                correct += (out.argmax(1) == y_test[i: i + b]).sum()
        acc, test_loss = correct.item() / len(y_test), loss.item() / len(y_test)
        history.append({"epoch": epoch, "test_accuracy": acc, "test_loss": test_loss, "train_seconds": seconds[-1]})
        print(f"torch {a.mode} epoch {epoch}: {seconds[-1]:.2f} s, test_acc {100 * acc:.2f}%", file=sys.stderr)
    total = time.perf_counter() - fit_start
    steady = sorted(seconds[1:])[len(seconds[1:]) // 2] if len(seconds) > 1 else seconds[0]
    print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "mode": a.mode,
                      "epochs": a.epochs, "batch_size": b, "epoch_seconds": seconds,
                      "median_epoch_seconds_after_first": steady,
                      "total_train_seconds": total, "wall_seconds": time.perf_counter() - START,
                      "images_per_second": (n // b) * b * a.epochs / sum(seconds),
                      "test_accuracy": history[-1]["test_accuracy"], "test_loss": history[-1]["test_loss"],
                      "history": history}))


if __name__ == "__main__":
    main()
