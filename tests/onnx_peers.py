#!/usr/bin/env python3
"""ONNX Runtime and OpenCV's dnn module run convoy's exported ONNX files and
predict what convoy predicts: the seed CNN, and ResNet-18,
EfficientNet-Lite0 (TensorFlow padding) and EfficientNet-B0 at 64x64, with
deterministic weights (tests/test_onnx.cpp's OnnxPeerCases writes the files,
the inputs and convoy's outputs).

  python3 tests/onnx_peers.py build/convoy_tests
Exit 77 (ctest: skipped) when neither onnxruntime nor opencv-python-headless
is installed (pip install onnxruntime opencv-python-headless).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("onnx_peers: numpy is missing; skipped")
    sys.exit(77)
try:
    import onnxruntime
except ImportError:
    onnxruntime = None
try:
    import cv2
except ImportError:
    cv2 = None


def read_safetensors(path, keep_dtype=False):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    types = {"F32": np.float32, "I32": np.int32}
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]],
                             dtype=types[v["dtype"]] if keep_dtype else np.float32).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


def peers_for(path, x):
    """Each installed peer's outputs for the ONNX file at `path` on x."""
    out = {}
    if onnxruntime is not None:
        session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        out["onnxruntime " + onnxruntime.__version__] = session.run(None, {"input": x})[0]
    if cv2 is not None:
        net = cv2.dnn.readNetFromONNX(path)
        net.setInput(x)
        out["opencv " + cv2.__version__] = net.forward()
    return out


PHOTOS = ["chelsea", "coffee", "astronaut", "motorcycle_left"]
SKIMAGE_DATA = "/usr/lib/python3/dist-packages/skimage/data"


def photo_input(path, size=224):
    """tests/fixtures/make_pretrained_top5_fixture.py's input: centre crop,
    nearest-neighbour resize, (v / 255 - 0.5) / 0.5, NCHW."""
    from PIL import Image
    rgb = np.asarray(Image.open(path).convert("RGB"))
    h, w, _ = rgb.shape
    s = min(h, w)
    crop = rgb[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s]
    idx = (2 * np.arange(size) + 1) * s // (2 * size)
    x = (crop[idx][:, idx].astype(np.float32) / np.float32(255) - np.float32(0.5)) / np.float32(0.5)
    return x.transpose(2, 0, 1)[None].copy()


def check_pretrained(tmp, peers_for):
    """The exported ImageNet-pretrained Lite0 gives PyTorch's (and convoy's) top-5 classes."""
    path = os.path.join(tmp, "pretrained_lite0.onnx")
    here = os.path.dirname(os.path.abspath(__file__))
    if not os.path.exists(path):
        print("pretrained Lite0: skipped (run tools/fetch_pretrained.sh)")
        return 0
    try:
        import PIL  # noqa: F401
    except ImportError:
        print("pretrained Lite0: skipped (PIL is missing)")
        return 0
    if not os.path.exists(os.path.join(SKIMAGE_DATA, "chelsea.png")):
        print("pretrained Lite0: skipped (scikit-image's photos are missing)")
        return 0
    oracle = read_safetensors(os.path.join(here, "fixtures", "pretrained_lite0_top5.safetensors"), keep_dtype=True)
    x = np.concatenate([photo_input(os.path.join(SKIMAGE_DATA, p + ".png")) for p in PHOTOS])
    failures = 0
    for peer, got in peers_for(path, x).items():
        same = sum(list(np.argsort(-got[i])[:5]) == list(oracle["top5." + p]) for i, p in enumerate(PHOTOS))
        diff = max(float(np.abs(got[i] - oracle["logits." + p]).max()) for i, p in enumerate(PHOTOS))
        ok = same == len(PHOTOS) and diff < 1e-3
        failures += not ok
        print(f"pretrained Lite0 in {peer}: top-5 as PyTorch's on {same} of {len(PHOTOS)} photos, "
              f"max |logit diff| {diff:.1e}{'' if ok else '  FAIL'}")
    return failures


def main():
    if onnxruntime is None and cv2 is None:
        print("onnx_peers: neither onnxruntime nor cv2 (opencv-python-headless) is installed; skipped")
        return 77
    tests = sys.argv[1]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CONVOY_ONNX_PEER_DIR=tmp, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
        subprocess.run([tests, "--gtest_filter=OnnxPeerCases.Write"], env=env, check=True, stdout=subprocess.DEVNULL)
        for name in ["seed_cnn", "resnet18", "tf_efficientnet_lite0", "efficientnet_b0"]:
            path = os.path.join(tmp, name + ".onnx")
            case = read_safetensors(os.path.join(tmp, name + ".safetensors"))
            x, want = case["input"], case["output"]
            peers = peers_for(path, x)
            for peer, got in peers.items():
                diff = float(np.abs(got - want).max())
                scale = float(np.abs(want).max())
                same = bool((got.argmax(1) == want.argmax(1)).all())
                ok = same and diff <= 1e-4 * max(scale, 1.0)
                failures += not ok
                print(f"{name} in {peer}: predictions {'match' if same else 'DIFFER'}, "
                      f"max |output diff| {diff:.2e} (max |output| {scale:.2f}){'' if ok else '  FAIL'}")
        failures += check_pretrained(tmp, peers_for)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
