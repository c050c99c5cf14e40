#!/usr/bin/env python3
"""The seed CNN (seeds/002: Fashion-MNIST, batch 128, SGD lr 0.01 momentum
0.5) trained by convoy and by its peers, on this machine, in one run, with
the same thread counts:

  convoy            build/convoy train
  convoy-bf16       build/convoy train --precision bf16 (CPUs with AVX512-BF16; not a default side)
  PyTorch (pip)     bench/pytorch_seed_cnn.py under .peers/torch (bench/setup_peers.sh)
  torch-pip-bf16    the same under torch.autocast(bfloat16) (--precision bf16; not a default side)
  PyTorch (Debian)  bench/pytorch_seed_cnn.py under /usr/bin/python3 (python3-torch)
  TensorFlow/Keras  bench/keras_seed_cnn.py under .peers/py (setup.sh: pip tensorflow-cpu)

Every side trains --epochs epochs on all 60,000 images and evaluates on the
10,000 test images after each. The table shows, per side and thread count:
the median epoch's training pass (the first includes warm-up everywhere),
images/s, achieved GFLOP/s (the convolutions' and dense layers'
multiply-adds, 2 FLOPs each, forward and backward) and its share of this
CPU's peak (bench/peak_gflops.cpp: a 2048^3 oneDNN matrix product on as
many threads), the process's peak resident memory, and test accuracy after
the last epoch. Sides whose interpreter or packages are missing are skipped.

  python3 bench/seed_cnn_vs_peers.py [--epochs 3] [--threads 2 1] [--sides convoy convoy-bf16 torch-pip ...]
                                     [--convoy build/convoy] [--baseline OLD_CONVOY] [--repeats 1]

--convoy times another convoy binary; --baseline adds the side convoy-baseline,
that binary's fp32 training, timed in turn with the others (a before/after
pair in one window); --repeats runs every side that many times, in turn, and
takes the median of the runs' median epochs (a shared machine's noise).

The GFLOP/s and % of peak of the bf16 sides count the same multiply-adds against
the fp32 peak.

Ends with the headline line:
seed_cnn_speedup_vs_fastest_peer_<T>threads: <fastest peer s/epoch / convoy s/epoch>x
(fp32 peers), and with convoy-bf16 and torch-pip-bf16, seed_cnn_bf16_speedup_vs_fastest_peer_<T>threads.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# TensorFlow lives in the project's environment (setup.sh makes .peers/py).
PEERS_PYTHON = os.path.join(ROOT, ".peers", "py", "bin", "python")
if not os.path.exists(PEERS_PYTHON):
    PEERS_PYTHON = sys.executable
BENCH = os.path.join(ROOT, "bench")
# Per training image: forward conv1 288,000 + conv2 640,000 + dense 32,000 +
# 1,000 FLOPs; backward twice that, less conv1's unneeded input gradient.
TRAIN_FLOPS_PER_IMAGE = 3 * 961_000 - 288_000


def run_measured(cmd, env=None):
    """Runs cmd in a child; returns its exit code and peak resident memory (MB, from wait4)."""
    pid = os.fork()
    if pid == 0:
        os.execvpe(cmd[0], cmd, {**os.environ, **(env or {})})
    _, status, usage = os.wait4(pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024.0


CONVOY = os.path.join(ROOT, "build", "convoy")
BASELINE = None  # --baseline


def side_command(side, epochs, threads, out_json):
    if side.startswith("convoy"):
        precision = "bf16" if side == "convoy-bf16" else "fp32"
        binary = BASELINE if side == "convoy-baseline" else CONVOY
        return [binary, "train", "--epochs", str(epochs), "--threads", str(threads),
                "--progress", "quiet", "--precision", precision, "--out", out_json], None
    script = {"torch-pip": "pytorch_seed_cnn.py", "torch-pip-bf16": "pytorch_seed_cnn.py",
              "torch-debian": "pytorch_seed_cnn.py", "keras": "keras_seed_cnn.py"}[side]
    python = {"torch-pip": os.path.join(ROOT, ".peers", "torch", "bin", "python"),
              "torch-pip-bf16": os.path.join(ROOT, ".peers", "torch", "bin", "python"),
              "torch-debian": "/usr/bin/python3", "keras": PEERS_PYTHON}[side]
    precision = ["--precision", "bf16"] if side.endswith("-bf16") else []
    return [python, os.path.join(BENCH, script), "--epochs", str(epochs), "--threads", str(threads)] + precision, python


def measure(side, epochs, threads):
    with tempfile.TemporaryDirectory() as tmp:
        cmd, python = side_command(side, epochs, threads, tmp)
        if python and not os.path.exists(python):
            return None, f"{python} missing (bench/setup_peers.sh installs pip's PyTorch)"
        stdout_path = os.path.join(tmp, "stdout.json")
        shell = ["sh", "-c", 'exec "$@" >"$OUT" 2>"$OUT.err"', "side"] + cmd
        code, peak_mb = run_measured(shell, {"OUT": stdout_path, "OMP_NUM_THREADS": str(threads)})
        if code != 0:
            with open(stdout_path + ".err") as f:
                lines = f.read().strip().splitlines()
            return None, (lines[-1] if lines else f"exit {code}")
        if side.startswith("convoy"):
            with open(os.path.join(tmp, "summary.json")) as f:
                result = json.load(f)
        else:
            with open(stdout_path) as f:
                result = json.loads(f.read().strip().splitlines()[-1])
        result["peak_mb"] = peak_mb
        return result, None


def peak_gflops():
    exe = os.path.join(ROOT, "build", "peak_gflops")
    if not os.path.exists(exe):
        return {}
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    return {int(k): v for k, v in json.loads(out)["gflops"].items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--sides", nargs="+", default=["convoy", "torch-pip", "torch-debian", "keras"])
    ap.add_argument("--convoy", default=CONVOY, help="the convoy binary to time")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--baseline", help="an older convoy binary, timed as the side convoy-baseline")
    a = ap.parse_args()
    globals()["CONVOY"] = os.path.abspath(a.convoy)
    if a.baseline:
        globals()["BASELINE"] = os.path.abspath(a.baseline)
        a.sides.insert(a.sides.index("convoy") + 1 if "convoy" in a.sides else 0, "convoy-baseline")
    peaks = peak_gflops()
    rows, skipped = [], []
    runs = {}
    for _ in range(a.repeats):
        for t in a.threads:
            for side in a.sides:
                r, why = measure(side, a.epochs, t)
                if r is None:
                    skipped.append(f"{side} ({t} threads): {why}")
                    continue
                runs.setdefault((side, t), []).append(r)
                print(f"  {side} {t} threads: {statistics.median(r['epoch_seconds']):.2f} s/epoch", file=sys.stderr)
    for (side, t), rs in runs.items():
        medians = [statistics.median(r["epoch_seconds"]) for r in rs]
        s = statistics.median(medians)
        r = rs[medians.index(sorted(medians)[len(medians) // 2])]
        version = r.get("torch") or (r.get("keras") and f"keras {r['keras']} / tf {r['tensorflow']}") or "convoy"
        gflops = 60_000 // 128 * 128 * TRAIN_FLOPS_PER_IMAGE / s / 1e9
        rows.append(dict(side=side, version=version, threads=t, seconds=s, ips=60_000 // 128 * 128 / s,
                         gflops=gflops, peak=100 * gflops / peaks[t] if t in peaks else float("nan"),
                         mb=r["peak_mb"], acc=r["test_accuracy"], runs=medians,
                         wait=r.get("input_wait_fraction")))
    print(f"seed CNN, Fashion-MNIST, batch 128, {a.epochs} epochs; median epoch's training pass; "
          f"peak fp32 GFLOP/s (oneDNN sgemm): {peaks}")
    print(f"{'side':<14} {'version':<26} {'thr':>3} {'s/epoch':>8} {'img/s':>8} {'GFLOP/s':>8} {'% peak':>7} "
          f"{'peak MB':>8} {'test acc':>9}")
    for r in rows:
        print(f"{r['side']:<14} {r['version'][:26]:<26} {r['threads']:>3} {r['seconds']:>8.2f} {r['ips']:>8.0f} "
              f"{r['gflops']:>8.1f} {r['peak']:>6.1f}% {r['mb']:>8.0f} {100 * r['acc']:>8.2f}%")
    for r in rows:
        if r["wait"] is not None:
            print(f"input wait, {r['side']} {r['threads']} threads: {100 * r['wait']:.1f}% of the training pass")
    if a.repeats > 1:
        for r in rows:
            print(f"runs, {r['side']} {r['threads']} threads: " + ", ".join(f"{m:.2f}" for m in r["runs"]))
    for s in skipped:
        print(f"skipped: {s}")
    by = {(r["side"], r["threads"]): r for r in rows}
    for side in a.sides:
        if (side, 1) in by and (side, 2) in by:
            print(f"1 -> 2 threads, {side}: {by[(side, 1)]['seconds'] / by[(side, 2)]['seconds']:.2f}x")
    t = a.threads[0]
    for ours, headline in (("convoy", "seed_cnn"), ("convoy-bf16", "seed_cnn_bf16")):
        if (ours, t) not in by:
            continue
        bf16 = ours.endswith("-bf16")  # fp32 against fp32 peers, bf16 against bf16 ones
        peers = [r for r in rows if not r["side"].startswith("convoy") and r["side"].endswith("-bf16") == bf16
                 and r["threads"] == t]
        if peers:
            fastest = min(peers, key=lambda r: r["seconds"])
            print(f"fastest {'bf16 ' if bf16 else ''}peer at {t} threads: {fastest['side']} ({fastest['version']})")
            speedup = fastest["seconds"] / by[(ours, t)]["seconds"]
            print(f"{headline}_speedup_vs_fastest_peer_{t}threads: {speedup:.2f}x")

if __name__ == "__main__":
    main()
