#!/usr/bin/env python3
"""Input pipeline throughput, convoy against tf.data and PyTorch's DataLoader,
same machine, same run, same chain: Fashion-MNIST's 60,000 training images,
read -> normalise -> shuffle 10,000 -> batch 128 -> prefetch, consumed as fast
as it comes (no training step). Each side runs --epochs epochs; the figure is
the median examples/s of the epochs after the first. PyTorch's DataLoader has
no shuffle buffer: it draws a full permutation (shuffle=True).

  python3 bench/pipeline_vs_peers.py [--epochs 4] [--convoy build/pipeline_convoy]

tf.data runs in this interpreter's environment (pip install tensorflow-cpu);
PyTorch under /usr/bin/python3 (Debian's python3-torch). Ends with the
headline line: pipeline_speedup_vs_fastest_peer: <convoy / fastest peer>x
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# TensorFlow lives in the project's environment (setup.sh makes .peers/py).
PEERS_PYTHON = os.path.join(ROOT, ".peers", "py", "bin", "python")
if not os.path.exists(PEERS_PYTHON):
    PEERS_PYTHON = sys.executable
PEERS = os.path.join(ROOT, "bench", "pipeline_peers.py")


def rate(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return statistics.median(json.loads(out.stdout.strip().splitlines()[-1])["examples_per_second"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--convoy", default=os.path.join(ROOT, "build", "pipeline_convoy"))
    a = ap.parse_args()
    e = ["--epochs", str(a.epochs)]
    # Each side at each of its settings; the headline compares each at its best
    # (convoy's map inline, its default, vs the fastest peer configuration).
    ours = [("convoy, map inline (default)", rate([a.convoy, "--parallelism", "1"] + e)),
            ("convoy, map on the pool (autotune)", rate([a.convoy, "--parallelism", "-1"] + e))]
    rows = [("tf.data, map AUTOTUNE", rate([PEERS_PYTHON, PEERS, "tfdata"] + e)),
            ("pytorch DataLoader, 0 workers", rate(["/usr/bin/python3", PEERS, "torch", "--workers", "0"] + e)),
            ("pytorch DataLoader, 2 workers", rate(["/usr/bin/python3", PEERS, "torch", "--workers", "2"] + e))]
    print(f"Fashion-MNIST train, normalise, shuffle 10000, batch 128, prefetch; {os.cpu_count()} cores")
    print(f"{'pipeline':<36} {'examples/s':>12}")
    for name, r in ours + rows:
        print(f"{name:<36} {r:>12,.0f}")
    fastest_peer = max(r for _, r in rows)
    print(f"pipeline_speedup_vs_fastest_peer: {max(r for _, r in ours) / fastest_peer:.2f}x")


if __name__ == "__main__":
    main()
