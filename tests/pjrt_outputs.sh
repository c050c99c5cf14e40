#!/usr/bin/env bash
# A `--device pjrt` run is an ordinary run (issue 21, "everything else
# unchanged"), on XLA's CPU plugin:
#  - it writes the same files as the same run on the CPU (checkpoints,
#    history, summary.json with the same keys but for the CPU backend's own
#    settings, plots, report, TensorBoard events), and a photo run's
#    submission.csv;
#  - callbacks act on it: early stopping stops it and restores the best
#    epoch's weights, saying so as on the CPU;
#  - `convoy export --onnx`, `predict` and `evaluate` read its checkpoint;
#  - a run stopped after epoch 1 and resumed ends with the same weights, bit
#    for bit, as one never interrupted (XLA's CPU plugin runs the same program
#    on the same inputs to the same bits; other plugins: docs/accelerators.md).
# Skips (saying so) where the plugin is missing.
set -u  # no pipefail: small_data.sh cuts zcat short on purpose
convoy="$(realpath "$1")"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cli_test_lib.sh"  # works in a scratch folder
source "$here/small_data.sh"

"$convoy" devices >devices 2>&1
if ! grep -q '^pjrt  cpu |' devices; then
  echo "skip --device pjrt outputs: $(grep '^pjrt ' devices)"
  finish pjrt_outputs
  exit 0
fi

make_small_fashion data 512 128
# min_delta 1.0 on an accuracy: only epoch 1 improves, so patience 1 stops after epoch 2.
cat >es.yaml <<'YAML'
training: {epochs: 4}
callbacks:
  early_stopping: {monitor: val_accuracy, patience: 1, min_delta: 1.0, restore_best_weights: true}
  reduce_lr_on_plateau: {monitor: val_loss, patience: 1}
YAML
before=$failures
common=(train --config es.yaml --data data --batch-size 32 --threads 1 --seed 4 --progress lines)
for device in cpu pjrt; do
  "$convoy" "${common[@]}" --device "$device" --out "$device" >"$device.log" 2>&1 ||
    fail "--device $device run exited $?: $(cat "$device.log")"
done
grep -q '| pjrt:cpu,' pjrt.log || fail "the run did not train on pjrt:cpu: $(head -3 pjrt.log)"
for log in cpu.log pjrt.log; do
  grep -qx "Epoch 2: early stopping" "$log" && grep -qx "Restoring model weights from the end of the best epoch: 1." "$log" ||
    fail "$log: early stopping did not stop after epoch 2 and restore epoch 1: $(cat "$log")"
done
# TensorBoard event files carry the host and a time in their names: compare their folders.
files() { (cd "$1" && find . -type f | sed -E 's|(tensorboard/[a-z]+)/.*|\1/<events>|' | sort -u); }
diff <(files cpu) <(files pjrt) >files.diff || fail "a pjrt run's files differ from a cpu run's: $(cat files.diff)"
python3 - cpu/summary.json pjrt/summary.json <<'PY' || fail "summary.json: keys differ"
import json, sys
def keys(v, at=""):
    if isinstance(v, dict):
        return {k for key, x in v.items() for k in {at + "." + key} | keys(x, at + "." + key)}
    return set()
cpu, pjrt = (json.load(open(f)) for f in sys.argv[1:])
# How the CPU backend ran (its kernels, threads, convolution algorithm): a CPU run's alone.
cpu_only = {".batch_slices", ".conv_algo", ".cpu_kernels", ".parallelism"}
missing, extra = keys(cpu) - keys(pjrt) - cpu_only, keys(pjrt) - keys(cpu)
assert not missing and not extra, f"missing {sorted(missing)}, extra {sorted(extra)}"
assert pjrt["stopped_epoch"] == 2 and pjrt["weights_epoch"] == 1, (pjrt["stopped_epoch"], pjrt["weights_epoch"])
PY
[[ $failures -eq $before ]] && echo "ok   a pjrt run writes a cpu run's $(files pjrt | wc -l) files and summary.json keys; early stopping acts on it"

before=$failures
"$convoy" export --checkpoint pjrt --onnx pjrt.onnx >export.log 2>&1 && [[ -s pjrt.onnx ]] ||
  fail "export --onnx of a pjrt run: $(cat export.log)"
"$convoy" predict --checkpoint pjrt --input data/t10k-images-idx3-ubyte --output pred.csv >/dev/null 2>predict.err ||
  fail "predict from a pjrt run: $(cat predict.err)"
[[ $(wc -l <pred.csv) -eq 129 ]] || fail "predict from a pjrt run: $(wc -l <pred.csv) lines, wanted 129"
reported=$(python3 -c "import json,sys; print('%.4f' % json.load(open(sys.argv[1]))['test_accuracy'])" pjrt/summary.json)
evaluated=$("$convoy" evaluate --checkpoint pjrt | sed -E 's/.*test_accuracy ([0-9.]+).*/\1/')
[[ "$reported" == "$evaluated" ]] || fail "evaluate of a pjrt run gives $evaluated, the run reported $reported"
[[ $failures -eq $before ]] && echo "ok   export --onnx, predict and evaluate ($evaluated) read a pjrt run's checkpoint"

# A photo run (CSV + JPEGs, augmentation on the host): submission.csv as on the CPU.
before=$failures
"$convoy" demo-data plant --out plant --train 24 --test 6 --size 60x40 --seed 3 >/dev/null || fail "demo-data"
"$convoy" train --data plant --set data.test_csv=test.csv --image-size 32 --epochs 1 --batch-size 8 --threads 1 \
  --device pjrt --progress lines --out photos >photos.log 2>&1 || fail "a pjrt photo run exited $?: $(cat photos.log)"
[[ $(wc -l <photos/submission.csv 2>/dev/null) -eq 7 ]] || fail "a pjrt photo run's submission.csv: $(cat photos.log)"
[[ $failures -eq $before ]] && echo "ok   a pjrt photo run writes submission.csv"

# Bit-for-bit resume: 2 epochs against 1 epoch, then --resume to 2.
before=$failures
plain=(train --data data --batch-size 32 --threads 1 --seed 6 --progress lines --device pjrt)
"$convoy" "${plain[@]}" --epochs 2 --out full >full.log 2>&1 || fail "2-epoch pjrt run: $(cat full.log)"
"$convoy" "${plain[@]}" --epochs 1 --out cut >cut.log 2>&1 || fail "1-epoch pjrt run: $(cat cut.log)"
"$convoy" train --resume cut --epochs 2 --progress lines >resume.log 2>&1 || fail "--resume: $(cat resume.log)"
grep -q '| pjrt:cpu,' resume.log && grep -q 'resuming after epoch 1' resume.log ||
  fail "--resume did not continue on pjrt:cpu after epoch 1: $(cat resume.log)"
cmp -s full/model.safetensors cut/model.safetensors ||
  fail "a resumed pjrt run's weights differ from an uninterrupted one's"
cmp -s <(cut -d, -f1-6 full/history.csv) <(cut -d, -f1-6 cut/history.csv) ||
  fail "a resumed pjrt run's history differs: $(paste -d'|' full/history.csv cut/history.csv)"
[[ $failures -eq $before ]] && echo "ok   --resume of a pjrt run ends with the uninterrupted run's weights, bit for bit"
finish pjrt_outputs
