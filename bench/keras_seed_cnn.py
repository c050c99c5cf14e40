#!/usr/bin/env python3
"""The seed CNN (seeds/002) trained in TensorFlow/Keras as convoy trains it:
same data files and normalisation, batch 128, SGD(lr 0.01, momentum 0.5),
the NLL of log-softmax (Keras: sparse categorical cross-entropy from
logits, the same function), a reshuffle per epoch with the remainder dropped,
evaluation on the full test set after each epoch. PyTorch's initialisation
scheme (uniform +-1/sqrt(fan_in) for weights and biases) and BN momentum
0.1 / eps 1e-5. Keras lays images out NHWC (its CPU convolutions take no
other), so Flatten orders features differently; that changes neither the
work nor the accuracy. Prints one JSON object like convoy's summary.json.

  python3 bench/keras_seed_cnn.py --epochs 2 --threads 2
"""
import argparse
import json
import os
import sys
import time

from fashion_idx import read_idx  # bench/ is on sys.path: the script's folder

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    import numpy as np
    import tensorflow as tf
    import keras
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    keras.utils.set_random_seed(a.seed)

    def load(split):
        x = read_idx(os.path.join(a.data, f"{split}-images-idx3-ubyte.gz")).astype(np.float32) / 255.0
        y = read_idx(os.path.join(a.data, f"{split}-labels-idx1-ubyte.gz")).astype(np.int32)
        return ((x - 0.1307) / 0.3081)[..., None], y

    x_train, y_train = load("train")
    x_test, y_test = load("t10k")

    def uniform(fan_in):
        b = 1.0 / fan_in ** 0.5
        return keras.initializers.RandomUniform(-b, b)

    def conv(filters, fan_in):
        return keras.layers.Conv2D(filters, 5, kernel_initializer=uniform(fan_in), bias_initializer=uniform(fan_in))

    def dense(units, fan_in):
        return keras.layers.Dense(units, kernel_initializer=uniform(fan_in), bias_initializer=uniform(fan_in))

    bn = dict(momentum=0.9, epsilon=1e-5)
    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        conv(10, 25), keras.layers.MaxPooling2D(2), keras.layers.ReLU(), keras.layers.BatchNormalization(**bn),
        conv(20, 250), keras.layers.MaxPooling2D(2), keras.layers.ReLU(), keras.layers.BatchNormalization(**bn),
        keras.layers.Flatten(), dense(50, 320), keras.layers.ReLU(), dense(10, 50)])
    model.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.5),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    train = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
             .shuffle(len(y_train), seed=a.seed, reshuffle_each_iteration=True)
             .batch(a.batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE))
    test = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(1000)

    class EpochTimer(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seconds = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_test_begin(self, logs=None):  # the training pass ends where validation starts
            self.seconds.append(time.perf_counter() - self.start)

    timer = EpochTimer()
    fit_start = time.perf_counter()
    h = model.fit(train, epochs=a.epochs, validation_data=test, callbacks=[timer], verbose=0)
    total = time.perf_counter() - fit_start
    steps = len(y_train) // a.batch_size
    for e, s in enumerate(timer.seconds, 1):
        print(f"keras epoch {e}: {s:.2f} s, test_acc {100 * h.history['val_accuracy'][e - 1]:.2f}%", file=sys.stderr)
    print(json.dumps({"device": "cpu", "threads": a.threads, "tensorflow": tf.__version__, "keras": keras.__version__,
                      "epochs": a.epochs, "batch_size": a.batch_size, "epoch_seconds": timer.seconds,
                      "total_train_seconds": total,
                      "images_per_second": steps * a.batch_size * a.epochs / sum(timer.seconds),
                      "test_accuracy": h.history["val_accuracy"][-1], "test_loss": h.history["val_loss"][-1]}))


if __name__ == "__main__":
    main()
