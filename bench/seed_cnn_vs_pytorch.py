#!/usr/bin/env python3
"""Seconds per epoch for the seed CNN (seeds/002: batch 128, SGD lr 0.01
momentum 0.5, Fashion-MNIST), convoy against PyTorch, same machine, same run,
same thread counts. Each side trains --epochs epochs; the table shows the
median epoch (the first includes warm-up on both sides).

  /usr/bin/python3 bench/seed_cnn_vs_pytorch.py [--epochs 3] [--threads 2 1]

Ends with the headline line: seed_cnn_speedup_vs_pytorch_<T>threads: <ratio>x
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_convoy(epochs, threads):
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([os.path.join(ROOT, "build", "convoy"), "train", "--epochs", str(epochs), "--threads",
                        str(threads), "--out", out], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(out, "summary.json")) as f:
            return json.load(f)


def run_pytorch(epochs, threads):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "pytorch_seed_cnn.py"), "--epochs",
                          str(epochs), "--threads", str(threads)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    a = ap.parse_args()
    rows = []
    for t in a.threads:
        c, p = run_convoy(a.epochs, t), run_pytorch(a.epochs, t)
        cs, ps = statistics.median(c["epoch_seconds"]), statistics.median(p["epoch_seconds"])
        rows.append((t, cs, ps, ps / cs, c["test_accuracy"], p["test_accuracy"]))
    print(f"seed CNN, Fashion-MNIST, batch 128, {a.epochs} epochs, median epoch (training pass)")
    print(f"{'threads':>7} {'convoy s/epoch':>15} {'pytorch s/epoch':>16} {'speedup':>8} {'convoy acc':>11} {'pytorch acc':>12}")
    for t, cs, ps, r, ca, pa in rows:
        print(f"{t:>7} {cs:>15.2f} {ps:>16.2f} {r:>7.2f}x {100 * ca:>10.2f}% {100 * pa:>11.2f}%")
    t, _, _, r, _, _ = rows[0]
    print(f"seed_cnn_speedup_vs_pytorch_{t}threads: {r:.2f}x")


if __name__ == "__main__":
    main()
