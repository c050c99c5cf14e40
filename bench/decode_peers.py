#!/usr/bin/env python3
"""The decode benchmark's peer sides, one thread each: every .jpg in --dir,
already in memory, decoded and brought to a 224x224 float CHW tensor with a
random horizontal flip and a random rotation (up to +-36 degrees, bilinear),
normalised with ImageNet's mean and std.

  decode_peers.py pil   --dir D [--draft]  # PIL + torchvision transforms (run by /usr/bin/python3)
  decode_peers.py tvio  --dir D            # torchvision.io.decode_jpeg + tensor transforms
  decode_peers.py tfdata --dir D [--ratio R]  # tf.data: decode_jpeg, resize, flip, ImageProjectiveTransformV3

--draft: PIL's Image.draft, its DCT-domain downscaling (the same libjpeg
feature convoy uses). --ratio: tf.io.decode_jpeg's DCT downscaling factor.
Prints one JSON line: images per second by CPU time (per core) and by wall
time, one value per round.
"""
import argparse
import glob
import io
import json
import math
import os
import time

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def files(d):
    paths = sorted(glob.glob(os.path.join(d, "*.jpg")))
    if not paths:
        raise SystemExit(f"{d}: no .jpg files; run bench/decode_vs_peers.py to make them")
    return [open(p, "rb").read() for p in paths]


def timed(rounds, passes, n, run_pass):
    cpu, wall = [], []
    run_pass()  # warm-up: imports, first-call set-up
    for _ in range(rounds):
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(passes):
            run_pass()
        c1, w1 = time.process_time(), time.perf_counter()
        cpu.append(n * passes / (c1 - c0))
        wall.append(n * passes / (w1 - w0))
    return cpu, wall


def pil_side(a, data):
    import torch
    import torchvision.transforms as T
    from PIL import Image
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    tf = T.Compose([T.Resize((a.size, a.size)), T.RandomHorizontalFlip(),
                    T.RandomRotation(36, interpolation=T.InterpolationMode.BILINEAR),
                    T.ToTensor(), T.Normalize(MEAN, STD)])
    sink = []

    def run_pass():
        for b in data:
            im = Image.open(io.BytesIO(b))
            if a.draft:
                im.draft("RGB", (a.size, a.size))
            sink.append(float(tf(im.convert("RGB"))[0, 0, 0]))
        sink.clear()
    return run_pass


def tvio_side(a, data):
    import torch
    import torchvision.transforms as T
    from torchvision.io import decode_jpeg, ImageReadMode
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    raw = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in data]
    tf = T.Compose([T.Resize((a.size, a.size), antialias=True), T.RandomHorizontalFlip(),
                    T.RandomRotation(36, interpolation=T.InterpolationMode.BILINEAR),
                    T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD)])
    sink = []

    def run_pass():
        for r in raw:
            sink.append(float(tf(decode_jpeg(r, mode=ImageReadMode.RGB))[0, 0, 0]))
        sink.clear()
    return run_pass


def tfdata_side(a, data):
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    size, ratio = a.size, a.ratio
    mean, std = tf.constant(MEAN), tf.constant(STD)

    def prepare(b):
        img = tf.io.decode_jpeg(b, channels=3, ratio=ratio)
        img = tf.image.resize(img, (size, size), method="area")  # float32
        img = tf.image.random_flip_left_right(img)
        # Keras RandomRotation's matrix, reflect fill, bilinear.
        angle = tf.random.uniform([], -0.1, 0.1) * 2 * math.pi
        c, s = tf.cos(angle), tf.sin(angle)
        h = w = tf.constant(size - 1, tf.float32)
        xo = (w - (c * w - s * h)) / 2
        yo = (h - (s * w + c * h)) / 2
        m = tf.reshape(tf.stack([c, -s, xo, s, c, yo, 0.0, 0.0]), [1, 8])
        img = tf.raw_ops.ImageProjectiveTransformV3(
            images=img[None], transforms=m, output_shape=[size, size], fill_value=0.0,
            interpolation="BILINEAR", fill_mode="REFLECT")[0]
        return tf.transpose((img / 255.0 - mean) / std, [2, 0, 1])

    opts = tf.data.Options()
    opts.threading.private_threadpool_size = 1
    opts.threading.max_intra_op_parallelism = 1
    ds = tf.data.Dataset.from_tensor_slices(data).map(prepare).with_options(opts)

    def run_pass():
        for t in ds:
            float(t[0, 0, 0])
    return run_pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("side", choices=["pil", "tvio", "tfdata"])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--draft", action="store_true")
    ap.add_argument("--ratio", type=int, default=1)
    a = ap.parse_args()
    data = files(a.dir)
    run_pass = {"pil": pil_side, "tvio": tvio_side, "tfdata": tfdata_side}[a.side](a, data)
    cpu, wall = timed(a.rounds, a.passes, len(data), run_pass)
    print(json.dumps({"images_per_second_cpu": cpu, "images_per_second_wall": wall}))


if __name__ == "__main__":
    main()
