"""Reads the Fashion-MNIST IDX files (raw or .gz) into numpy arrays: the one
reader of the Python benchmark sides (bench/pytorch_seed_cnn.py,
bench/keras_seed_cnn.py, bench/gpu_seed_cnn_torch.py), which need nothing but numpy for it."""
import gzip


def read_idx(path):
    import numpy as np

    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)
