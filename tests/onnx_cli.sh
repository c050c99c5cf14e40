#!/usr/bin/env bash
# `convoy export` writes a trained run's model as ONNX (BN folded, or kept);
# `convoy summary --onnx` imports it back, and a TensorFlow-style graph; an op convoy lacks, a missing file
# or checkpoint is one error line and exit 2. Where ONNX Runtime is installed,
# it predicts the same classes on the test images as `convoy predict`.
set -u
convoy="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
here="$(dirname "$0")"
source "$here/small_data.sh"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

make_small_fashion "$tmp/data" 512 64
"$convoy" train --epochs 1 --threads 2 --data "$tmp/data" --batch-size 64 --progress quiet --out "$tmp/run" >/dev/null ||
  { echo "FAIL: training the run to export"; exit 1; }

"$convoy" export --checkpoint "$tmp/run" --onnx "$tmp/folded.onnx" >"$tmp/out" || fail "export"
grep -q "wrote $tmp/folded.onnx (ONNX opset 13: 13 nodes" "$tmp/out" || { fail "export summary"; cat "$tmp/out"; }
"$convoy" export --checkpoint "$tmp/run" --onnx "$tmp/kept.onnx" --keep-batch-norm >/dev/null || fail "export --keep-batch-norm"
"$convoy" summary --onnx "$tmp/kept.onnx" >"$tmp/summary" || fail "summary --onnx"
[[ $(grep -c "batch_norm" "$tmp/summary") -eq 2 ]] || { fail "the imported model lacks its 2 batch norms"; cat "$tmp/summary"; }

# A TensorFlow-style graph (tests/fixtures/make_onnx_tf_fixtures.py): its NHWC input and final Softmax are said.
"$convoy" summary --onnx "$here/fixtures/onnx_tf_keras_cnn.onnx" >"$tmp/tf" || fail "summary --onnx of a TensorFlow-style graph"
grep -q "takes NHWC images" "$tmp/tf" && grep -q "Softmax, is left out" "$tmp/tf" || { fail "NHWC or Softmax not said"; cat "$tmp/tf"; }

# expect_error NAME NEEDLE -- ARGS...: exit 2, one stderr line containing NEEDLE, no output file.
expect_error() {
  local name="$1" needle="$2"
  shift 3
  "$convoy" "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne 2 || $(wc -l <"$tmp/err") -ne 1 ]] || ! grep -qF -- "$needle" "$tmp/err"; then
    fail "$name: rc=$rc, wanted one line naming '$needle':"
    cat "$tmp/err"
  else
    echo "ok   $name: $(cat "$tmp/err")"
  fi
}
expect_error "unsupported op" "node '/1/Erf' has op Erf, which convoy cannot import" -- summary --onnx "$here/fixtures/onnx_torch_gelu.onnx"
expect_error "missing ONNX file" "$tmp/none.onnx: cannot open" -- summary --onnx "$tmp/none.onnx"
head -c 700 "$tmp/folded.onnx" >"$tmp/cut.onnx"
expect_error "truncated ONNX file" "$tmp/cut.onnx: malformed ONNX model" -- summary --onnx "$tmp/cut.onnx"
expect_error "export without a checkpoint" "checkpoint.safetensors" -- export --checkpoint "$tmp/data" --onnx "$tmp/x.onnx"
[[ ! -e "$tmp/x.onnx" ]] || fail "a failed export left $tmp/x.onnx"
expect_error "export to a missing folder" "$tmp/no/such" -- export --checkpoint "$tmp/run" --onnx "$tmp/no/such/m.onnx"

# The exported model in ONNX Runtime predicts what convoy predicts.
peers_python="${CONVOY_PEERS_PYTHON:-python3}"  # .peers/py, made by setup.sh
if "$peers_python" -c "import onnxruntime, numpy" 2>/dev/null; then
  "$convoy" predict --checkpoint "$tmp/run" --input "$tmp/data/t10k-images-idx3-ubyte" --output "$tmp/pred.csv" >/dev/null
  "$peers_python" - "$tmp" <<'PY' || fail "ONNX Runtime disagrees with convoy predict"
import sys, numpy as np, onnxruntime
tmp = sys.argv[1]
raw = np.fromfile(f"{tmp}/data/t10k-images-idx3-ubyte", dtype=np.uint8)[16:].reshape(-1, 1, 28, 28)
x = ((raw.astype(np.float32) / 255 - 0.1307) / 0.3081).astype(np.float32)
probs = np.loadtxt(f"{tmp}/pred.csv", delimiter=",", skiprows=1)[:, 1:]
for name in ["folded", "kept"]:
    out = onnxruntime.InferenceSession(f"{tmp}/{name}.onnx", providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    p = np.exp(out)  # the seed CNN ends in log-softmax
    same = (p.argmax(1) == probs.argmax(1)).mean()
    print(f"onnxruntime, {name} BN: {same:.0%} of {len(x)} predictions as convoy's, max |p diff| {np.abs(p - probs).max():.1e}")
    assert same == 1 and np.abs(p - probs).max() < 1e-5
PY
else
  echo "skip: onnxruntime is not installed (pip install onnxruntime)"
fi
exit $((failures > 0))
