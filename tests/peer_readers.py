#!/usr/bin/env python3
"""The files convoy writes, read by the peers' own readers: TensorBoard loads
the event files, the `safetensors` package loads the weights and checkpoint.
Skips (exit 0, saying so) when those packages are absent.

  python3 tests/peer_readers.py RUN_DIR
"""
import glob
import os
import sys


def main(run):
    checked = 0
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        print("skip: tensorboard is not installed (pip install tensorboard)")
    else:
        for kind in ("train", "validation"):
            acc = EventAccumulator(os.path.join(run, "tensorboard", kind))
            acc.Reload()
            tags = acc.Tags()["scalars"]
            assert "epoch_loss" in tags and "epoch_accuracy" in tags, (kind, tags)
            losses = [e.value for e in acc.Scalars("epoch_loss")]
            assert len(losses) >= 1 and all(v > 0 for v in losses), losses
        checked += 1
        print(f"ok: TensorBoard reads {run}/tensorboard ({len(losses)} epochs, tags {sorted(tags)})")
    try:
        from safetensors.numpy import load_file
        from safetensors import safe_open
    except ImportError:
        print("skip: safetensors is not installed (pip install safetensors)")
    else:
        weights = load_file(os.path.join(run, "model.safetensors"))
        assert weights["conv2d_0.weight"].shape == (10, 1, 5, 5), weights["conv2d_0.weight"].shape
        assert weights["dense_0.weight"].shape == (50, 320)
        with safe_open(os.path.join(run, "checkpoint.safetensors"), "numpy") as f:
            meta = f.metadata()
            assert meta["format"] == "convoy-checkpoint-1" and int(meta["epoch"]) >= 1, meta
            assert "optimizer.state" in f.keys()
        checked += 1
        print(f"ok: safetensors reads model.safetensors ({len(weights)} tensors) and the checkpoint")
    print(f"{checked} passed, 0 failed")


if __name__ == "__main__":
    main(sys.argv[1])
