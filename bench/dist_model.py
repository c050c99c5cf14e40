#!/usr/bin/env python3
"""A model of data-parallel throughput (docs/distributed.md): each step costs
the compute of one replica plus a ring allreduce of the gradients,

    t_allreduce(N) = 2 (N - 1) / N * bytes / bandwidth + 2 (N - 1) * latency
    t_step(N)      = t_compute + exposed part of t_allreduce(N)
    throughput(N)  = N * batch / t_step(N),  efficiency = t_compute / t_step(N)

where `overlap` (0 or 1) says whether gradient buckets (25 MiB, as
PyTorch DDP) are sent while backward runs (backward ~ 2/3 of the compute;
the last bucket is always exposed). The last columns replace the
ring's 2 (N - 1) latency hops with a tree's 2 log2(N) (NCCL picks trees for
small messages); images/s is for tree + overlap. Prints the table for the seed
CNN and ResNet-50 at 8, 64 and 256 GPUs; with --check, the prediction for this
machine's measured 1-process step time and gradient allreduce time against the
measured 2-process throughput.

  python3 bench/dist_model.py
  python3 bench/dist_model.py --check STEP_MS ALLREDUCE_US MEASURED_2PROC_IMG_S
    (STEP_MS: 128 / images/s of 1 process x 1 thread; ALLREDUCE_US: the last
    line of `mpirun -np 2 build/dist_allreduce`)
"""
import argparse
import math

# (name, fp32 gradient bytes, batch per GPU, compute seconds per step on one GPU)
MODELS = [
    # 21,900 parameters. The step is launch-bound on a GPU: ~30 kernels
    # forward and backward plus the update at ~10 us each (assumed).
    ("seed CNN", 21_900 * 4, 128, 0.3e-3),
    # 25.6 M parameters; ~2,600 images/s per A100 with mixed precision
    # (batch 256) -> ~0.1 s per step (assumed from published figures).
    ("ResNet-50", 25_557_032 * 4, 256, 256 / 2600),
]

# (name, GPUs, bus bandwidth bytes/s per GPU, latency per ring hop seconds)
# Within a node NVLink; across nodes the slowest link of the ring sets the
# pace: InfiniBand (one 200 Gb/s HCA per GPU) or 25 Gb/s Ethernet (TCP).
FABRICS = [
    ("NVLink, 1 node", 8, 230e9, 5e-6),
    ("InfiniBand HDR", 64, 22e9, 8e-6),
    ("InfiniBand HDR", 256, 22e9, 8e-6),
    ("25 GbE TCP", 64, 2.8e9, 30e-6),
    ("25 GbE TCP", 256, 2.8e9, 30e-6),
]


def ring_allreduce(n, nbytes, bandwidth, latency):
    return 0.0 if n == 1 else 2 * (n - 1) / n * nbytes / bandwidth + 2 * (n - 1) * latency


def tree_allreduce(n, nbytes, bandwidth, latency):
    """NCCL's double binary tree: the ring's bandwidth term, log2(N) hops up and down."""
    return 0.0 if n == 1 else 2 * (n - 1) / n * nbytes / bandwidth + 2 * math.log2(n) * latency


BUCKET_BYTES = 25 * 2**20  # PyTorch DDP's default bucket


def step_time(compute, allreduce, overlap, nbytes):
    """Backward (~2/3 of the compute) can hide the buckets sent while it runs,
    never the last one: a model of one bucket gains nothing."""
    if not overlap:
        return compute + allreduce
    buckets = max(1, math.ceil(nbytes / BUCKET_BYTES))
    backward = compute * 2 / 3
    exposed = max(allreduce - backward * (buckets - 1) / buckets, allreduce / buckets)
    return compute + exposed


def table():
    print(f"{'model':<10} {'fabric':<16} {'GPUs':>5} {'ring ms':>8} {'compute ms':>11} "
          f"{'eff. ring':>10} {'ring+overlap':>13} {'tree+overlap':>13} {'images/s':>11}")
    for name, nbytes, batch, compute in MODELS:
        for fabric, n, bw, lat in FABRICS:
            ar = ring_allreduce(n, nbytes, bw, lat)
            plain, hidden = step_time(compute, ar, False, nbytes), step_time(compute, ar, True, nbytes)
            tree = step_time(compute, tree_allreduce(n, nbytes, bw, lat), True, nbytes)
            print(f"{name:<10} {fabric:<16} {n:>5} {1e3 * ar:>8.3f} {1e3 * compute:>11.2f} "
                  f"{compute / plain:>10.2f} {compute / hidden:>13.2f} {compute / tree:>13.2f} "
                  f"{n * batch / tree:>11,.0f}")


def check(step_ms, allreduce_us, measured):
    nbytes, batch = MODELS[0][1], MODELS[0][2]
    ar = allreduce_us * 1e-6
    step = step_time(step_ms * 1e-3, ar, False, nbytes)
    predicted = 2 * batch / step
    print(f"this machine, seed CNN, 2 processes x 1 thread: allreduce {1e6 * ar:.0f} us per step of "
          f"{step_ms:.1f} ms compute -> predicted {predicted:,.0f} images/s "
          f"(efficiency {step_ms * 1e-3 / step:.3f}); measured {measured:,.0f} "
          f"({measured / predicted:.2f} of the prediction)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", nargs=3, type=float, metavar=("STEP_MS", "ALLREDUCE_US", "IMG_S"))
    a = ap.parse_args()
    table()
    if a.check:
        check(*a.check)


if __name__ == "__main__":
    main()
