#!/usr/bin/env python3
"""ONNX Runtime and OpenCV's dnn module run convoy's exported ONNX files and
predict what convoy predicts: the seed CNN and ResNet-18 at 64x64 with
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


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], dtype=np.float32).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


def main():
    if onnxruntime is None and cv2 is None:
        print("onnx_peers: neither onnxruntime nor cv2 (opencv-python-headless) is installed; skipped")
        return 77
    tests = sys.argv[1]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CONVOY_ONNX_PEER_DIR=tmp, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
        subprocess.run([tests, "--gtest_filter=OnnxPeerCases.Write"], env=env, check=True, stdout=subprocess.DEVNULL)
        for name in ["seed_cnn", "resnet18"]:
            path = os.path.join(tmp, name + ".onnx")
            case = read_safetensors(os.path.join(tmp, name + ".safetensors"))
            x, want = case["input"], case["output"]
            peers = {}
            if onnxruntime is not None:
                session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
                peers["onnxruntime " + onnxruntime.__version__] = session.run(None, {"input": x})[0]
            if cv2 is not None:
                net = cv2.dnn.readNetFromONNX(path)
                net.setInput(x)
                peers["opencv " + cv2.__version__] = net.forward()
            for peer, got in peers.items():
                diff = float(np.abs(got - want).max())
                scale = float(np.abs(want).max())
                same = bool((got.argmax(1) == want.argmax(1)).all())
                ok = same and diff <= 1e-4 * max(scale, 1.0)
                failures += not ok
                print(f"{name} in {peer}: predictions {'match' if same else 'DIFFER'}, "
                      f"max |output diff| {diff:.2e} (max |output| {scale:.2f}){'' if ok else '  FAIL'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
