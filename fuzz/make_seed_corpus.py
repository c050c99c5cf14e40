#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs into fuzz/corpus/<name>/: small valid
files of each format and a few near misses. Standard library only.
Run from anywhere: python3 fuzz/make_seed_corpus.py [CHECKPOINT...]
(checkpoint_metadata's seeds come from real checkpoints: pass the
checkpoint.safetensors files of `convoy train --out` runs, e.g. one stopped
mid-epoch with SIGTERM and one finished.)
checkpoint's seeds are checkpoints convoy writes (CheckpointFuzzSeeds.Write,
with CONVOY_TESTS as for onnx) and version-1 copies of them without a checksum.
onnx's seeds are the small ONNX fixtures in tests/fixtures (PyTorch's and the
TensorFlow-style graphs) and convoy's own exports of tiny models, which
CONVOY_TESTS=build/tests/convoy_tests makes it write (OnnxFuzzSeeds.Write)."""
import glob
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def idx(dims, payload):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


idx_seeds = {
    "images_2x3x3": idx([2, 3, 3], bytes(range(18))),
    "labels_5": idx([5], bytes([0, 1, 2, 9, 4])),
    "empty_dims": idx([0, 28, 28], b""),
    "rank4": idx([1, 1, 2, 2], bytes([7, 8, 9, 10])),
    "truncated": idx([4, 2, 2], bytes(5)),
    "wrong_type": bytes([0, 0, 0x0D, 1]) + struct.pack(">I", 1) + b"\0\0\0\0",
}
for name, data in idx_seeds.items():
    put("idx_raw", name, data)
    put("idx_gzip", name + ".gz", gzip.compress(data, mtime=0))

config = {
    "data": {"dir": "/usr/share/datasets/fashion-mnist"},
    "model": {"name": "seed_cnn"},
    "optimizer": {"name": "adamw", "lr": 0.001, "weight_decay": 0.01, "beta1": 0.9, "beta2": 0.999,
                  "eps": 1e-8, "clip_norm": 1.0},
    "schedule": {"kind": "one_cycle", "max_lr": 0.01, "min_lr": 0.0, "warmup_epochs": 1},
    "training": {"epochs": 3, "batch_size": 64, "seed": 7, "threads": 2, "steps_per_execution": 4,
                 "checkpoint_every_steps": 100},
    "callbacks": {"terminate_on_nan": True, "on_nan": "skip_step",
                  "early_stopping": {"monitor": "val_loss", "mode": "min", "patience": 2, "min_delta": 0.001,
                                     "restore_best_weights": True}},
    "output": {"dir": "runs/x", "progress": "lines", "profile": False},
}
plateau = {"optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True},
           "callbacks": {"reduce_lr_on_plateau": {"monitor": "val_accuracy", "factor": 0.5, "patience": 1,
                                                  "min_lr": 1e-5, "min_delta": 0}}}
put("run_config_json", "full.json", json.dumps(config, indent=2))
put("run_config_json", "plateau.json", json.dumps(plateau))
put("run_config_json", "empty_object.json", "{}")
put("run_config_json", "bad_type.json", '{"training": {"epochs": "ten"}}')


def to_yaml(value, indent=0):
    lines = []
    for key, v in value.items():
        if isinstance(v, dict):
            lines.append(" " * indent + key + ":")
            lines.append(to_yaml(v, indent + 2))
        else:
            lines.append(" " * indent + key + ": " + json.dumps(v))
    return "\n".join(lines)


put("run_config_yaml", "full.yaml", to_yaml(config) + "\n")
put("run_config_yaml", "plateau.yaml", to_yaml(plateau) + "\n")
put("run_config_yaml", "flow.yaml", "training: {epochs: 2, batch_size: 8}\nmodel: [seed_cnn]\n")
put("run_config_yaml", "anchors.yaml", "base: &b {lr: 0.1}\noptimizer: *b\n")
put("run_config_yaml", "comment_only.yaml", "# nothing but a comment\n")


# Structure-aware seeds for the limits of docs/reliability.md ("Hostile
# input"): nesting just inside and just past 64 levels, alias expansion just
# inside and far past 100,000 values, and a key given twice.
def nested(depth, inner="1"):
    return "[" * depth + inner + "]" * depth


def alias_levels(levels, width=10):
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


put("run_config_json", "nested_62.json", '{"training": {"epochs": ' + nested(62) + "}}")
put("run_config_json", "nested_65.json", '{"training": {"epochs": ' + nested(65) + "}}")
put("run_config_json", "duplicate_key.json", '{"training": {"epochs": 1, "epochs": 2}}')
put("run_config_yaml", "nested_62.yaml", "training:\n  epochs: " + nested(60) + "\n")
put("run_config_yaml", "nested_65.yaml", "training:\n  epochs: " + nested(65) + "\n")
put("run_config_yaml", "nested_block_65.yaml", "".join("  " * i + "k:\n" for i in range(65)))
put("run_config_yaml", "aliases_4_levels.yaml", alias_levels(4))   # 11,111 values: inside the budget
put("run_config_yaml", "alias_bomb.yaml", alias_levels(9))          # 10^9 values: refused
put("run_config_yaml", "merge_keys.yaml", "base: &b {lr: 0.1}\noptimizer:\n  <<: *b\n  name: sgd\n")
put("run_config_yaml", "duplicate_key.yaml", "training:\n  epochs: 1\n  epochs: 2\n")


def safetensors(tensors, metadata=None):
    header, blobs, offset = {}, b"", 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs += data
        offset += len(data)
    head = json.dumps(header).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    return struct.pack("<Q", len(head)) + head + blobs


put("safetensors", "two_tensors.safetensors",
    safetensors({"dense_0.weight": ("F32", [3, 4], struct.pack("<12f", *range(12))),
                 "dense_0.bias": ("F32", [3], struct.pack("<3f", 1, 2, 3))}, {"format": "pt"}))
put("safetensors", "int_and_bytes.safetensors",
    safetensors({"labels": ("I32", [2], struct.pack("<2i", 4, -1)), "img": ("U8", [2, 2], bytes([1, 2, 3, 4])),
                 "empty": ("F32", [0, 5], b"")}))
put("safetensors", "bad_dtype.safetensors", safetensors({"x": ("F64", [1], bytes(8))}))



def raw_safetensors(header, data=b""):
    head = header.encode()
    return struct.pack("<Q", len(head)) + head + data


# Nesting past the limit where the values are read (shape, dtype, offsets,
# metadata), just inside it, and a tensor named twice.
put("safetensors", "nested_shape_65.safetensors",
    raw_safetensors('{"w": {"dtype": "F32", "data_offsets": [0, 4], "shape": ' + nested(65) + "}}", bytes(4)))
put("safetensors", "nested_dtype_65.safetensors",
    raw_safetensors('{"w": {"shape": [1], "data_offsets": [0, 4], "dtype": ' + nested(65, '"F32"') + "}}", bytes(4)))
put("safetensors", "nested_metadata_62.safetensors",
    raw_safetensors('{"__metadata__": {"format": ' + nested(62, '"pt"') + "}}"))
put("safetensors", "duplicate_tensor.safetensors",
    raw_safetensors('{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
                    '"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}', bytes(4)))


# checkpoint_metadata: the safetensors __metadata__ of a checkpoint as
# key NUL value NUL ..., so that mutations reach the JSON inside the values.
def metadata_input(meta):
    return b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in meta.items())


for i, path in enumerate(sys.argv[1:]):
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    meta = json.loads(data[8:8 + length])["__metadata__"]
    meta.pop("checksum", None)  # not read by the metadata parser
    put("checkpoint_metadata", "from_run_%d" % i, metadata_input(meta))
put("checkpoint_metadata", "version_1", metadata_input({
    "format": "convoy-checkpoint-1", "epoch": "1", "config": json.dumps(config),
    "history": json.dumps({"epochs": [{"epoch": 1, "train_loss": 1.5, "train_accuracy": 0.5, "test_loss": 1.0,
                                        "test_accuracy": 0.7, "train_seconds": 1.0, "images_per_second": 100.0,
                                        "lr": 0.01}], "total_train_seconds": 2.0, "images_trained": 2048})}))


# onnx: small real files (each under libFuzzer's 64 KiB -max_len).
onnx_dir = os.path.join(HERE, "corpus", "onnx")
os.makedirs(onnx_dir, exist_ok=True)
for path in sorted(glob.glob(os.path.join(HERE, "..", "tests", "fixtures", "onnx_*.onnx"))):
    if os.path.getsize(path) <= 65536:
        shutil.copy(path, os.path.join(onnx_dir, os.path.basename(path)))
if os.environ.get("CONVOY_TESTS"):
    subprocess.run([os.environ["CONVOY_TESTS"], "--gtest_filter=OnnxFuzzSeeds.Write"], check=True,
                   env=dict(os.environ, CONVOY_ONNX_SEED_DIR=onnx_dir), stdout=subprocess.DEVNULL)

# jpeg: the small JPEG test pictures (baseline 4:2:0, 4:4:4, 4:2:2, gray,
# progressive, restart markers), each behind option bytes 0, 4 and 10
# (fuzz_jpeg.cpp: channels file/RGB/gray at full size, 1/8 and 1/2).
for path in sorted(glob.glob(os.path.join(HERE, "..", "tests", "fixtures", "images", "*.jpg"))):
    with open(path, "rb") as f:
        jpeg = f.read()
    for option in (0, 4, 10):
        put("jpeg", f"{os.path.basename(path)[:-4]}_{option}.jpg", bytes([option]) + jpeg)


# image: decode_image on any bytes (fuzz_image.cpp: the first byte picks the
# channels and size hint, as for jpeg). The PNG test pictures (gray, 16-bit,
# 1-bit, palette, RGBA, interlaced) and one JPEG, each behind option bytes 0,
# 4 and 10; PNGs written here for the other colour types and bit depths; and
# headers claiming more pixels than convoy decodes or than their bytes hold.
def png(width, height, color_type, bit_depth, raw, extra=b"", interlace=0):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra + chunk(b"IDAT", zlib.compress(raw)) +
            chunk(b"IEND", b""))


def rows(height, row):
    return b"".join(b"\0" + row(y) for y in range(height))


pictures = sorted(glob.glob(os.path.join(HERE, "..", "tests", "fixtures", "images", "*.png")))
pictures.append(os.path.join(HERE, "..", "tests", "fixtures", "images", "gray.jpg"))
for path in pictures:
    with open(path, "rb") as f:
        picture = f.read()
    if len(picture) < 65536:
        for option in (0, 4, 10):
            put("image", f"{os.path.basename(path).replace('.', '_')}_{option}", bytes([option]) + picture)
made = {
    "gray_alpha16.png": png(5, 3, 4, 16, rows(3, lambda y: bytes(range(y, y + 20)))),
    "rgb16.png": png(4, 2, 2, 16, rows(2, lambda y: bytes(range(24)))),
    "gray2.png": png(9, 2, 0, 2, rows(2, lambda y: bytes([0x1b, 0xe4, 0x40]))),
    "gray4_trns.png": png(3, 3, 0, 4, rows(3, lambda y: bytes([0x12, 0x30])),
                          extra=struct.pack(">I", 2) + b"tRNS\0\x01" + struct.pack(">I", zlib.crc32(b"tRNS\0\x01"))),
    "palette2.png": png(4, 1, 3, 2, rows(1, lambda y: bytes([0x1b])),
                        extra=struct.pack(">I", 9) + b"PLTE" + bytes(range(9)) +
                        struct.pack(">I", zlib.crc32(b"PLTE" + bytes(range(9))))),
    "rgba_interlaced.png": png(3, 3, 6, 8, bytes(42), interlace=1),  # Adam7: 5 passes, 42 bytes
    "claims_100000x100000.png": png(100000, 100000, 0, 8, rows(1, lambda y: bytes(8))),
    "claims_16000x16000.png": png(16000, 16000, 2, 8, rows(1, lambda y: bytes(48))),
    "truncated.png": png(20, 20, 0, 8, rows(20, lambda y: bytes(range(20))))[:-30],
    "not_an_image.txt": b"<html>not found</html>",
}
for name, data in made.items():
    for option in (0, 10):
        put("image", f"{name.replace('.', '_')}_{option}", bytes([option]) + data)


# example_file: convoy's cache file (src/data/example_file.h): examples of
# every dtype and of text features, an empty tensor, a file cut short, and
# lengths and shapes far past what the file holds.
def cache_file(examples, end=True):
    def named(s):
        return struct.pack("<I", len(s)) + s
    out = b"convoy-examples-1\n"
    for tensors, texts in examples:
        out += struct.pack("<II", len(tensors), len(texts))
        for name, dtype, shape, data in tensors:
            out += named(name) + bytes([dtype, len(shape)]) + b"".join(struct.pack("<q", d) for d in shape) + data
        for name, values in texts:
            out += named(name) + struct.pack("<I", len(values)) + b"".join(named(v) for v in values)
    return out + (struct.pack("<I", 0xFFFFFFFF) if end else b"")


image_example = ([(b"image", 2, [1, 2, 2], bytes([1, 2, 3, 4])), (b"label", 1, [], struct.pack("<i", 3))],
                 [(b"id", [b"n0"])])
put("example_file", "two_examples.cache", cache_file([image_example, image_example]))
put("example_file", "f32_and_texts.cache",
    cache_file([([(b"x", 0, [2, 2], struct.pack("<4f", 1, 2, 3, 4))], [(b"tags", [b"a", b"", b"bc"])])]))
put("example_file", "empty_tensor.cache", cache_file([([(b"e", 2, [0, 28, 28], b"")], [])]))
put("example_file", "no_examples.cache", cache_file([]))
put("example_file", "cut_short.cache", cache_file([image_example])[:-9])
put("example_file", "huge_shape.cache", cache_file([([(b"x", 2, [1 << 40] * 4, b"")], [])]))
put("example_file", "huge_string.cache", cache_file([]).replace(b"\xff\xff\xff\xff", struct.pack("<III", 0, 1, 0xFFFFFFF0)))
put("example_file", "many_strings.cache", cache_file([([], [(b"id", [])])]).replace(
    struct.pack("<I", 0) + struct.pack("<I", 0xFFFFFFFF), struct.pack("<I", 0xFFFFFFFF)))


# checkpoint: convoy's own checkpoints of a small model (version 2, with a
# checksum: a mutation stops at the integrity check) and version-1 copies
# (no checksum: mutations reach the metadata, the model and the tensors).
def safetensors_parts(data):
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + length]), data[8 + length:]


if os.environ.get("CONVOY_TESTS"):
    with tempfile.TemporaryDirectory() as made_dir:
        subprocess.run([os.environ["CONVOY_TESTS"], "--gtest_filter=CheckpointFuzzSeeds.Write"], check=True,
                       env=dict(os.environ, CONVOY_CHECKPOINT_SEED_DIR=made_dir), stdout=subprocess.DEVNULL)
        last_v1 = None
        for path in sorted(glob.glob(os.path.join(made_dir, "*.safetensors"))):
            with open(path, "rb") as f:
                data = f.read()
            name = os.path.basename(path)[:-len(".safetensors")]
            put("checkpoint", name + "_v2", data)
            header, blobs = safetensors_parts(data)
            meta = header["__metadata__"]
            meta.pop("checksum")
            meta["format"] = "convoy-checkpoint-1"
            meta["epoch"] = str(json.loads(meta.pop("position"))["epoch"])
            head = json.dumps(header).encode()
            put("checkpoint", name + "_v1", struct.pack("<Q", len(head)) + head + blobs)
            last_v1 = header, blobs
        # A config asking for 10^9 units: its weights were allocated before any
        # tensor was looked up. Built from the last version-1 copy, if any.
        if last_v1:
            header, blobs = last_v1
            meta = header["__metadata__"]
            meta["config"] = json.dumps(dict(json.loads(meta["config"]), model={"name": "custom", "layers": [
                {"type": "flatten"}, {"type": "dense", "units": 1000000000}]}))
            head = json.dumps(header).encode()
            put("checkpoint", "huge_model_v1", struct.pack("<Q", len(head)) + head + blobs)


# manifest_csv: CSVs as the image workflow reads them (fuzz_manifest_csv.cpp:
# the first byte picks the options: 1 label column, 2 classes given, 4 skip
# bad rows, 8 one class per row, 16 no extension), with bad rows of each kind.
one_hot = ("image_id,healthy,rust\nTrain_0,1,0\nTrain_1,0,1\nTrain_2,1,1\nTrain_3,0,0\nTrain_4,1.0,0.0\n"
           "Train_5,2,0\n,1,0\nTrain_0,0,1\n../up,1,0\n/abs,0,1\nshort,1\n")
labels = ("image_id,label\nTrain_0,healthy\nTrain_1,rust\nTrain_2,\nTrain_3,scab\nTrain_4,.\nTrain_0,rust\n"
          "a/b,healthy\n\"q,uoted\",rust\n")
for name, text, picks in (("one_hot", one_hot, (0, 2, 4, 12, 16)), ("labels", labels, (1, 3, 5, 7, 21)),
                          ("unlabeled", "image_id\nTest_0\nTest_1\n", (0, 4)),
                          ("header_only", "image_id,healthy\n", (0,)), ("no_id_column", "id,x\na,1\n", (0,))):
    for pick in picks:
        put("manifest_csv", f"{name}_{pick}.csv", bytes([pick]) + text.encode())
