#!/usr/bin/env python3
"""JPEGs that exercise convoy's Huffman decoder (src/image/jpeg_huffman.cpp,
as bench/huffman_vs_turbo drives it) beyond the decode benchmark's files:
scikit-image's sample photos re-encoded by PIL at several qualities and
chroma subsamplings, grey ones, odd sizes (partial MCUs),
optimised Huffman tables, restart markers, and progressive ones (which the
decoder must report as unsupported).

  python3 bench/huffman_check_files.py [--out /tmp/convoy-huffman-check]
  build/huffman_vs_turbo --reps 1 /tmp/convoy-huffman-check/*.jpg
"""
import argparse
import glob
import os
import sys

PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png", "rocket.jpg",
          "hubble_deep_field.jpg", "camera.png", "moon.png", "brick.png", "grass.png"]


def skimage_data():
    for p in ["/usr/lib/python3*/dist-packages/skimage/data",
              os.path.join(os.path.dirname(os.__file__), "site-packages", "skimage", "data")]:
        for d in glob.glob(p):
            if os.path.exists(os.path.join(d, "chelsea.png")):
                return d
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/convoy-huffman-check")
    a = ap.parse_args()
    try:
        from PIL import Image
    except ImportError:
        print("skipped: PIL missing")
        return
    data = skimage_data()
    if data is None:
        print("skipped: scikit-image's photos not found")
        return
    os.makedirs(a.out, exist_ok=True)
    n = 0
    for name in PHOTOS:
        path = os.path.join(data, name)
        if not os.path.exists(path):
            continue
        im = Image.open(path)
        im = im.convert("L" if im.mode in ("L", "I", "I;16") else "RGB")
        base = name.split(".")[0]
        # Odd sizes: partial MCUs at the right and bottom edges.
        odd = im.crop((0, 0, im.width - 5, im.height - 3))
        for q in (50, 75, 90, 95, 100):
            for sub in ((0, 1, 2) if im.mode == "RGB" else (0,)):
                im.save(os.path.join(a.out, f"{base}_q{q}_s{sub}.jpg"), "JPEG", quality=q, subsampling=sub)
                n += 1
            odd.save(os.path.join(a.out, f"{base}_odd_q{q}.jpg"), "JPEG", quality=q)
            n += 1
        im.save(os.path.join(a.out, f"{base}_opt.jpg"), "JPEG", quality=85, optimize=True)
        im.save(os.path.join(a.out, f"{base}_gray.jpg"), "JPEG", quality=85) if im.mode == "L" else \
            im.convert("L").save(os.path.join(a.out, f"{base}_gray.jpg"), "JPEG", quality=85)
        im.save(os.path.join(a.out, f"{base}_progressive.jpg"), "JPEG", quality=85, progressive=True)
        n += 3
        try:  # restart markers (Pillow >= 10.2)
            odd.save(os.path.join(a.out, f"{base}_rst_blocks.jpg"), "JPEG", quality=90, restart_marker_blocks=7)
            im.save(os.path.join(a.out, f"{base}_rst_rows.jpg"), "JPEG", quality=80, restart_marker_rows=1)
            n += 2
        except TypeError:
            print("note: this PIL cannot write restart markers", file=sys.stderr)
    print(f"{n} JPEGs in {a.out}")


if __name__ == "__main__":
    main()
