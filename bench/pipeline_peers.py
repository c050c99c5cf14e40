#!/usr/bin/env python3
"""The pipeline benchmark's peers: the same chain as bench/pipeline_convoy.cpp
(Fashion-MNIST's 60,000 training images, read -> normalise -> shuffle 10,000
-> batch 128 -> prefetch), consumed as fast as it comes, in tf.data or in
PyTorch's DataLoader. Prints one JSON line: examples per second of each epoch
after the first (warm-up).

  python3 bench/pipeline_peers.py tfdata [--epochs 4]
  /usr/bin/python3 bench/pipeline_peers.py torch [--epochs 4] [--workers 0]
"""
import argparse
import gzip
import json
import os
import time

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.1307, 0.3081


def read_idx(name):
    for candidate in (name + ".gz", name):
        path = os.path.join(DATA, candidate)
        if os.path.exists(path):
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rb") as f:
                raw = f.read()
            rank = raw[3]
            dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
            return np.frombuffer(raw, np.uint8, offset=4 + 4 * rank).reshape(dims)
    raise SystemExit(f"{DATA}: no {name}[.gz]; install dataset-fashion-mnist")


def load():
    images = read_idx("train-images-idx3-ubyte")[:, None, :, :]  # N, 1, 28, 28 (CHW, as convoy)
    labels = read_idx("train-labels-idx1-ubyte").astype(np.int32)
    return images, labels


def tfdata_epochs(epochs):
    import tensorflow as tf
    images, labels = load()

    def normalize(image, label):
        return (tf.cast(image, tf.float32) / 255.0 - MEAN) / STD, label

    ds = (tf.data.Dataset.from_tensor_slices((images, labels))
          .map(normalize, num_parallel_calls=tf.data.AUTOTUNE)
          .shuffle(10000, seed=1)
          .batch(128)
          .prefetch(2))
    for _ in range(epochs):
        yield sum(int(y.shape[0]) for _, y in ds)


def torch_epochs(epochs, workers):
    import torch
    images, labels = load()

    class FashionMnist(torch.utils.data.Dataset):
        def __len__(self):
            return len(labels)

        def __getitem__(self, i):
            x = (torch.from_numpy(images[i]).float() / 255.0 - MEAN) / STD
            return x, int(labels[i])

    loader = torch.utils.data.DataLoader(
        FashionMnist(), batch_size=128, shuffle=True, num_workers=workers,
        generator=torch.Generator().manual_seed(1),
        **({"prefetch_factor": 2, "persistent_workers": True} if workers else {}))
    for _ in range(epochs):
        yield sum(int(y.shape[0]) for _, y in loader)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("peer", choices=["tfdata", "torch"])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (torch)")
    a = ap.parse_args()
    epochs = tfdata_epochs(a.epochs) if a.peer == "tfdata" else torch_epochs(a.epochs, a.workers)
    rates = []
    for i in range(a.epochs):
        start = time.perf_counter()
        n = next(epochs)
        seconds = time.perf_counter() - start
        assert n == 60000, n
        if i > 0:
            rates.append(n / seconds)
    print(json.dumps({"examples_per_second": rates}))


if __name__ == "__main__":
    main()
