#!/usr/bin/env python3
"""JPEG decode + augmentation throughput per core: convoy against PIL with
torchvision's transforms, torchvision.io and tf.data, on the same files, on
the same machine, in one run.

The files: photos from scikit-image's data folder (astronaut, chelsea,
coffee, motorcycle, rocket, Hubble), cut to 3:2, enlarged to 2048x1365 with
Lanczos, given a mild sensor-like grain (Gaussian, sigma 3 levels, so the
files have a photo's entropy, ~1.4 bits per pixel rather than an enlarged
image's ~1.1) and saved as JPEG quality 90, 4:2:0 (PIL's defaults).

The work per image, from the file's bytes in memory to what a model takes:
decode, resize to 224x224, random horizontal flip, random rotation up to
+-36 degrees (bilinear), f32 CHW normalised with ImageNet's mean and std.
Every side runs on one thread, pinned to one core, and is timed by its
process's CPU time (images per CPU-second = per core; robust when other work
shares the machine); wall-clock rates are printed beside it. Each figure is
the median of --rounds rounds of --passes passes over the files; every side
runs --repeats times, interleaved. The headline then comes from --pairs
short runs (3 rounds of 1 pass) of convoy and the fastest peer back to back:
the median of convoy's rate over the peer's within each pair. (The shared
machine's speed drifts by tens of percent over seconds; a pair a few seconds
apart sees nearly the same machine.)

Sides (those whose packages are missing are skipped with a note):
  convoy                      bench/decode_convoy.cpp: decode_map (DCT scaling to >= 224, area
                              resize), augment (flip, rotation, reflect fill), to_float_chw
  PIL + torchvision           Image.open, convert, torchvision Resize / RandomHorizontalFlip /
                              RandomRotation / ToTensor / Normalize (fill: black, its only mode)
  PIL draft + torchvision     the same after Image.draft: libjpeg's DCT scaling, as convoy uses
  torchvision.io              decode_jpeg + the same transforms on tensors (no DCT scaling)
  tf.data                     tf.io.decode_jpeg, tf.image.resize (area), random_flip_left_right,
                              ImageProjectiveTransformV3 (Keras RandomRotation's matrix, reflect)
  tf.data ratio=4             the same with decode_jpeg(ratio=4): TF's DCT scaling (fixed per
                              pipeline; 4 is the right one for these files)

  python3 bench/decode_vs_peers.py [--rounds 5] [--passes 3] [--repeats 2] [--pairs 9] [--convoy build/decode_convoy]

Runs PIL/torchvision under /usr/bin/python3 (Debian's torch, torchvision,
PIL) and tf.data under this interpreter. Ends with the headline line:
decode_speedup_vs_fastest_peer: <convoy / fastest peer, per core>
"""
import argparse
import glob
import io
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(ROOT, "bench", "decode_peers.py")
PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png", "rocket.jpg", "hubble_deep_field.jpg"]
SIZE = (2048, 1365)


def skimage_data():
    """scikit-image's data folder, from either Python's install."""
    patterns = ["/usr/lib/python3*/dist-packages/skimage/data",
                os.path.join(os.path.dirname(os.__file__), "site-packages", "skimage", "data")]
    for p in patterns:
        for d in glob.glob(p):
            if os.path.exists(os.path.join(d, "chelsea.png")):
                return d
    return None


def make_files(out):
    """The benchmark's JPEGs (made once, reused while they exist)."""
    import numpy as np
    from PIL import Image
    os.makedirs(out, exist_ok=True)
    if len(glob.glob(os.path.join(out, "*.jpg"))) >= len(PHOTOS) * 2:
        return
    data = skimage_data()
    if data is None:
        raise SystemExit("scikit-image's photos not found: apt-get install python3-skimage (or pip install scikit-image)")
    rng = np.random.default_rng(0)
    for name in PHOTOS:
        im = Image.open(os.path.join(data, name)).convert("RGB")
        w, h = im.size
        if w / h > 1.5:
            nw = int(h * 1.5)
            im = im.crop(((w - nw) // 2, 0, (w - nw) // 2 + nw, h))
        else:
            nh = int(w / 1.5)
            im = im.crop((0, (h - nh) // 2, w, (h - nh) // 2 + nh))
        im = im.resize(SIZE, Image.LANCZOS)
        for variant, picture in (("", im), ("_mirrored", im.transpose(Image.FLIP_LEFT_RIGHT))):
            a = np.asarray(picture).astype(np.float32) + rng.normal(0, 3, (SIZE[1], SIZE[0], 3))
            Image.fromarray(np.clip(a + 0.5, 0, 255).astype(np.uint8)).save(
                os.path.join(out, name.split(".")[0] + variant + ".jpg"), "JPEG", quality=90)


def pin_to_one_core():
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})


def run(cmd):
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, preexec_fn=pin_to_one_core,
                             env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "OMP_NUM_THREADS": "1"})
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        err = getattr(e, "stderr", "") or str(e)
        return None, err.strip().splitlines()[-1] if err.strip() else str(e)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return (statistics.median(r["images_per_second_cpu"]), statistics.median(r["images_per_second_wall"])), None


def has(python, module):
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=9)
    ap.add_argument("--convoy", default=os.path.join(ROOT, "build", "decode_convoy"))
    ap.add_argument("--files", default="/tmp/convoy-decode-bench")
    a = ap.parse_args()
    make_files(a.files)
    paths = sorted(glob.glob(os.path.join(a.files, "*.jpg")))
    mean_kb = statistics.mean(os.path.getsize(p) for p in paths) / 1024
    common = ["--dir", a.files, "--rounds", str(a.rounds), "--passes", str(a.passes)]
    debian = "/usr/bin/python3"
    sides = [("convoy", [a.convoy] + common, True)]
    tv = has(debian, "torchvision")
    sides += [("PIL + torchvision", [debian, PEERS, "pil"] + common, tv),
              ("PIL draft + torchvision", [debian, PEERS, "pil", "--draft"] + common, tv),
              ("torchvision.io", [debian, PEERS, "tvio"] + common, tv)]
    tf = has(sys.executable, "tensorflow")
    sides += [("tf.data", [sys.executable, PEERS, "tfdata"] + common, tf),
              ("tf.data ratio=4", [sys.executable, PEERS, "tfdata", "--ratio", "4"] + common, tf)]

    print(f"{len(paths)} JPEGs {SIZE[0]}x{SIZE[1]} q90 ({mean_kb:.0f} KB mean) -> 224x224, flip, rotation, "
          f"f32 CHW; one thread pinned to one core; {os.cpu_count()} cores on the machine")
    print(f"{'side':<26} {'img/s per core':>15} {'img/s wall':>11}")
    # Every side runs --repeats times, the sides interleaved (the order turned
    # each repeat), so a slow spell of a shared machine falls on all of them
    # rather than on whichever ran then. A side's figure is the median of its
    # repeats.
    available = [(name, cmd) for name, cmd, ok in sides if ok]
    for name, cmd, ok in sides:
        if not ok:
            print(f"{name:<26} {'skipped: its Python packages are missing':>27}")
    runs = {name: [] for name, _ in available}
    failed = {}
    for rep in range(a.repeats):
        turn = rep % len(available)
        for name, cmd in available[turn:] + available[:turn]:
            if name in failed:
                continue
            r, err = run(cmd)
            if r is None:
                failed[name] = err
            else:
                runs[name].append(r)
    results = {}
    for name, _ in available:
        if name in failed:
            print(f"{name:<26} failed: {failed[name]}")
            continue
        cpu = statistics.median(r[0] for r in runs[name])
        wall = statistics.median(r[1] for r in runs[name])
        results[name] = (cpu, wall)
        print(f"{name:<26} {cpu:>15.1f} {wall:>11.1f}")
    peers = {k: v for k, v in results.items() if k != "convoy"}
    if "convoy" not in results or not peers:
        raise SystemExit("decode_speedup_vs_fastest_peer: n/a (convoy or every peer missing)")
    fastest = max(peers, key=lambda k: peers[k][0])
    # The headline from short runs of convoy and the fastest peer back to
    # back: this machine's speed drifts by tens of percent over seconds, and
    # a pair of runs a few seconds apart sees nearly the same machine.
    cmds = dict(available)
    short = ["--rounds", "3", "--passes", "1"]
    ratios = []
    for _ in range(a.pairs):
        c, _err = run(cmds["convoy"] + short)
        p, _err = run(cmds[fastest] + short)
        if c and p:
            ratios.append(c[0] / p[0])
    if not ratios:
        raise SystemExit("decode_speedup_vs_fastest_peer: n/a (the paired runs failed)")
    print(f"fastest peer per core: {fastest}; convoy / it in {len(ratios)} back-to-back pairs: "
          + ", ".join(f"{r:.2f}" for r in sorted(ratios)))
    print(f"decode_speedup_vs_fastest_peer: {statistics.median(ratios):.2f}")

if __name__ == "__main__":
    main()
