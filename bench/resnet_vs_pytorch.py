#!/usr/bin/env python3
"""The second workload (issue 6): ResNet-18 as torchvision lays it out, on
3x64x64 inputs, batch 64, 10 classes, SGD momentum 0.9, trained on random
data — convoy (bench/train_steps_convoy.cpp) against PyTorch
(bench/pytorch_train_steps.py; pip's under .peers/torch from
bench/setup_peers.sh, and Debian's), same machine, same thread counts, one
run. Each side: 3 warm-up steps, then --steps timed ones; the table shows
the median step. The -bf16 sides (not defaults; CPUs with AVX512-BF16):
convoy's --precision bf16 and PyTorch under torch.autocast(bfloat16), each
with fp32 master weights.

  python3 bench/resnet_vs_pytorch.py [--steps 20] [--threads 2 1] [--model resnet18] [--size 64]
                                     [--sides convoy convoy-bf16 torch-pip torch-pip-bf16 torch-debian]

Ends with the headline line (fp32 sides):
resnet18_speedup_vs_fastest_pytorch_<T>threads: <fastest PyTorch step / convoy step>x
and, with both bf16 sides, resnet18_bf16_speedup_vs_fastest_pytorch_<T>threads.
"""
import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHONS = {"torch-pip": os.path.join(ROOT, ".peers", "torch", "bin", "python"), "torch-debian": "/usr/bin/python3"}
SIDES = ["convoy", "convoy-bf16", "torch-pip", "torch-pip-bf16", "torch-debian", "torch-debian-bf16"]


def precision_of(side):
    return "bf16" if side.endswith("-bf16") else "fp32"


def run(cmd, threads):
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    return json.loads(p.stdout.strip().splitlines()[-1]), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--sides", nargs="+", choices=SIDES, default=["convoy", "torch-pip", "torch-debian"])
    a = ap.parse_args()
    common = ["--model", a.model, "--size", str(a.size), "--batch", str(a.batch), "--steps", str(a.steps)]
    rows, skipped = [], []
    for t in a.threads:
        for side in a.sides:
            precision = ["--precision", precision_of(side)]
            if side.startswith("convoy"):
                r, why = run([os.path.join(ROOT, "build", "train_steps_convoy")] + common + precision, t)
                version = "convoy"
            else:
                python = PYTHONS[side.removesuffix("-bf16")]
                if not os.path.exists(python):
                    skipped.append(f"{side}: {python} missing (bench/setup_peers.sh)")
                    continue
                script = os.path.join(ROOT, "bench", "pytorch_train_steps.py")
                r, why = run([python, script, "--threads", str(t)] + common + precision, t)
                version = r["torch"] if r else ""
            if r:
                rows.append((side, version, t, r))
            else:
                skipped.append(f"{side} ({t} threads): {why}")
    print(f"{a.model}, 3x{a.size}x{a.size}, batch {a.batch}, SGD momentum 0.9, random data; median of {a.steps} steps")
    print(f"{'side':<14} {'version':<22} {'thr':>3} {'s/step':>8} {'img/s':>8} {'cpu s/step':>10}")
    median, cpu = {}, {}
    for side, version, t, r in rows:
        m = statistics.median(r["step_seconds"])
        median[(side, t)] = m
        cpu[(side, t)] = r.get("cpu_seconds_per_step")
        c = f"{cpu[(side, t)]:>10.3f}" if cpu[(side, t)] is not None else f"{'-':>10}"
        print(f"{side:<14} {version[:22]:<22} {t:>3} {m:>8.3f} {a.batch / m:>8.1f} {c}")
    for s in skipped:
        print(f"skipped: {s}")
    t = a.threads[0]
    for precision, ours, name in (("fp32", "convoy", a.model), ("bf16", "convoy-bf16", f"{a.model}_bf16")):
        peers = [m for (side, th), m in median.items()
                 if side.startswith("torch") and precision_of(side) == precision and th == t]
        if (ours, t) in median and peers:
            print(f"{name}_speedup_vs_fastest_pytorch_{t}threads: {min(peers) / median[(ours, t)]:.2f}x")
    # On one thread, CPU time per step: a ratio that survives a busy machine
    # (two threads that spin at barriers do not; see docs/benchmarks.md).
    peers = [c for (side, th), c in cpu.items() if side in ("torch-pip", "torch-debian") and th == 1 and c]
    if cpu.get(("convoy", 1)) and peers:
        print(f"{a.model}_cpu_time_speedup_vs_fastest_pytorch_1thread: {min(peers) / cpu[('convoy', 1)]:.2f}x")


if __name__ == "__main__":
    main()
