#!/usr/bin/env python3
"""Shards written by `convoy shards`, read by TensorFlow's own reader:
tf.data.TFRecordDataset + tf.io.parse_single_example give back every image's
bytes exactly, with its label and id (plain and gzip; class folders and a
one-hot CSV). Skips (exit 0, saying so) when TensorFlow is not installed.

  python3 tests/tfrecord_compat.py build/convoy
"""
import glob
import os
import random
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def shards(convoy, *args):
    subprocess.run([convoy, "shards", *args], check=True, stdout=subprocess.DEVNULL)


def read(tf, files, features, compression):
    out = {}
    for raw in tf.data.TFRecordDataset(files, compression_type=compression):
        ex = tf.io.parse_single_example(raw, features)
        out[ex["image/id"].numpy().decode()] = ex
    return out


def check_folders(tf, convoy, tmp, rng):
    images = {}
    for label, cls in enumerate(["ant", "bee", "cow"]):
        os.makedirs(os.path.join(tmp, "tree", cls))
        for i in range(7):
            data = rng.randbytes(rng.randrange(1000, 30000))
            path = os.path.join(tmp, "tree", cls, f"{i}.jpg")
            with open(path, "wb") as f:
                f.write(data)
            images[f"{cls}/{i}.jpg"] = (data, label)
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        "image/class/text": tf.io.FixedLenFeature([], tf.string),
        "image/format": tf.io.FixedLenFeature([], tf.string),
        "image/id": tf.io.FixedLenFeature([], tf.string),
    }
    for gzip in (False, True):
        out = os.path.join(tmp, f"folder_out_{gzip}")
        shards(convoy, "--folder", os.path.join(tmp, "tree"), "--out", out, "--shard-mb", "0.05", "--seed", "4",
               *(["--gzip"] if gzip else []))
        files = sorted(glob.glob(os.path.join(out, "train-*-of-*.tfrecord" + (".gz" if gzip else ""))))
        assert len(files) >= 3, files
        got = read(tf, files, features, "GZIP" if gzip else "")
        assert sorted(got) == sorted(images), (sorted(got), sorted(images))
        for id_, (data, label) in images.items():
            ex = got[id_]
            assert ex["image/encoded"].numpy() == data, id_
            assert ex["image/class/label"].numpy() == label, id_
            assert ex["image/class/text"].numpy().decode() == ["ant", "bee", "cow"][label], id_
            assert ex["image/format"].numpy() == b"jpeg", id_
        print(f"ok: tf.data reads convoy's {'gzip' if gzip else 'plain'} shards of class folders "
              f"({len(files)} shards, {len(got)} images, bytes and labels identical)")


def check_one_hot_csv(tf, convoy, tmp, rng):
    root = os.path.join(tmp, "pp")
    os.makedirs(os.path.join(root, "images"))
    classes = ["healthy", "multiple_diseases", "rust", "scab"]
    rows, images = [], {}
    for i in range(10):
        label = i % 4
        data = rng.randbytes(5000)
        with open(os.path.join(root, "images", f"Train_{i}.jpg"), "wb") as f:
            f.write(data)
        one_hot = [1.0 if c == label else 0.0 for c in range(4)]
        rows.append(f"Train_{i}," + ",".join(str(int(v)) for v in one_hot))
        images[f"Train_{i}"] = (data, one_hot)
    with open(os.path.join(root, "train.csv"), "w", newline="") as f:
        f.write("image_id," + ",".join(classes) + "\r\n" + "\r\n".join(rows) + "\r\n")
    out = os.path.join(tmp, "pp_out")
    shards(convoy, "--csv", os.path.join(root, "train.csv"), "--out", out, "--prefix", "pp")
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/one_hot": tf.io.FixedLenFeature([4], tf.float32),
        "image/id": tf.io.FixedLenFeature([], tf.string),
    }
    got = read(tf, sorted(glob.glob(os.path.join(out, "pp-*.tfrecord"))), features, "")
    assert sorted(got) == sorted(images)
    for id_, (data, one_hot) in images.items():
        assert got[id_]["image/encoded"].numpy() == data, id_
        assert got[id_]["image/class/one_hot"].numpy().tolist() == one_hot, id_
    with open(os.path.join(out, "classes.txt")) as f:
        assert f.read().split() == classes
    print(f"ok: tf.data reads convoy's shards of a one-hot CSV ({len(got)} images, one-hot labels identical)")


def main(convoy):
    try:
        import tensorflow as tf
    except ImportError:
        print("skip: tensorflow is not installed (pip install tensorflow-cpu); convoy's own tests still ran")
        return
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        check_folders(tf, convoy, tmp, rng)
        check_one_hot_csv(tf, convoy, tmp, rng)


if __name__ == "__main__":
    main(sys.argv[1])
