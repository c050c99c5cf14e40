#!/usr/bin/env bash
# The Plant Pathology image workflow end to end (docs/workflow.md): tiny demo
# data in Kaggle's layout, two epochs through the CSV + JPEG pipeline,
# submission.csv, predict and evaluate from the checkpoint; a missing image,
# a truncated JPEG and a bad CSV row each fail with one line naming it, and
# under on_bad_example: skip are counted while training still runs.
set -u
convoy="$1"
source "$(dirname "$0")/cli_test_lib.sh"

# Every error case also asks for an output folder and must leave no summary.json there.
expect_error_out=out_err

# checks_submission FILE: header, one row per test.csv row in its order, rows summing to 1.
check_submission() {
  local file="$1"
  [[ "$(head -1 "$file")" == "image_id,healthy,multiple_diseases,rust,scab" ]] || fail "$file: header $(head -1 "$file")"
  diff <(tail -n +2 plant/test.csv | cut -d, -f1) <(tail -n +2 "$file" | cut -d, -f1) >/dev/null ||
    fail "$file: ids differ from test.csv's"
  local bad
  bad=$(awk -F, 'NR > 1 { s = 0; for (i = 2; i <= NF; ++i) { if ($i < 0 || $i > 1) s = -9; s += $i }
                          if (NF != 5 || s < 0.9999 || s > 1.0001) print NR ": " $0 }' "$file")
  [[ -z "$bad" ]] || fail "$file: rows not 4 probabilities summing to 1: $bad"
}

"$convoy" demo-data plant --out plant --train 48 --test 10 --size 120x80 --seed 3 >/dev/null || fail "demo-data"
cat >cfg.yaml <<'YAML'
data:
  dir: plant
  kind: csv
  test_csv: test.csv
  width: 48
  height: 32
  mean: [0.5]
  std: [0.25]
  augment: {horizontal_flip: true, vertical_flip: true, rotation: 0.05, zoom: 0.1, brightness: 0.1, cutout: 1}
model: {name: plant_cnn}
loss: {name: categorical_crossentropy, from_logits: true}
optimizer: {name: adam, lr: 0.001}
training: {epochs: 2, batch_size: 8, threads: 1}
callbacks: {early_stopping: {monitor: val_loss, patience: 20}}
output: {progress: lines}
YAML

if "$convoy" train --config cfg.yaml --out run >log 2>err; then
  echo "ok   train: $(tail -2 log | head -1)"
  test_rows=$(($(wc -l <plant/test.csv) - 1))
  [[ $(($(wc -l <run/submission.csv) - 1)) -eq $test_rows ]] || fail "submission.csv: not $test_rows rows"
  check_submission run/submission.csv
  python3 - <<'PY' || fail "summary.json"
import json
s = json.load(open("run/summary.json"))
d = s["data"]
assert d["kind"] == "csv" and d["classes"] == ["healthy", "multiple_diseases", "rust", "scab"], d
assert d["train_examples"] + d["validation_examples"] == 48 and d["test_examples"] == 10, d
assert d["skipped_examples"] == 0 and d["skipped"] == [], d
assert len(s["history"]) == 2 and 0 <= s["evaluation"]["accuracy"] <= 1, s["history"]
PY
  # The checkpoint rebuilds the same data: predict gives the same file, evaluate the same validation accuracy.
  "$convoy" predict --checkpoint run --output again.csv >/dev/null 2>err || fail "predict: $(cat err)"
  cmp -s again.csv run/submission.csv || fail "predict --checkpoint: differs from the run's submission.csv"
  acc=$("$convoy" evaluate --checkpoint run 2>err | sed -n 's/.*test_accuracy \([0-9.]*\).*/\1/p')
  want=$(python3 -c 'import json; print("%.4f" % json.load(open("run/summary.json"))["history"][-1]["test_accuracy"])')
  [[ "$acc" == "$want" ]] || fail "evaluate --checkpoint: accuracy '$acc', the run's last epoch had $want"
else
  fail "train: $(cat err)"
fi

# Bad data, one problem at a time, then all together under skip.
cp -r plant missing && rm missing/images/Train_5.jpg
cp -r plant truncated && head -c 1500 plant/images/Train_7.jpg >truncated/images/Train_7.jpg
cp -r plant badrow && echo "Train_x,1,0" >>badrow/train.csv
expect_error "missing image" "missing/images/Train_5.jpg" -- train --config cfg.yaml --data missing
expect_error "truncated JPEG" "truncated/images/Train_7.jpg" -- train --config cfg.yaml --data truncated
expect_error "bad CSV row" "badrow/train.csv: line 50" -- train --config cfg.yaml --data badrow
cp -r missing all3 && cp truncated/images/Train_7.jpg all3/images/ && cp badrow/train.csv all3/
head -c 1500 plant/images/Test_3.jpg >all3/images/Test_3.jpg  # a test image: its row stays, at equal odds
sed 's/^  kind: csv$/  kind: csv\n  on_bad_example: skip/' cfg.yaml >skip.yaml
if "$convoy" train --config skip.yaml --data all3 --out skipped >log 2>err; then
  grep -q "skipped 3 bad example" log || fail "skip: no log line counting 3: $(head -5 log)"
  python3 - <<'PY' || fail "skip: summary.json"
import json
d = json.load(open("skipped/summary.json"))["data"]
assert d["skipped_examples"] == 4, d
text = " ".join(d["skipped"])
assert all(s in text for s in ("Train_5.jpg", "Train_7.jpg", "line 50", "Test_3.jpg")), d["skipped"]
assert d["train_examples"] + d["validation_examples"] == 46 and d["test_examples"] == 10, d
rows = {r.split(",")[0]: r.strip().split(",")[1:] for r in open("skipped/submission.csv").readlines()[1:]}
assert rows["Test_3"] == ["0.250000"] * 4, rows["Test_3"]
PY
  check_submission skipped/submission.csv
  echo "ok   skip: $(grep -c . skipped/submission.csv) submission lines, $(sed -n 1p log)"
else
  fail "skip: $(cat err)"
fi

# TFRecord shards of the same data (convoy shards): a flipped byte is a CRC error naming the file and record.
"$convoy" shards --csv plant/train.csv --out shards --shard-mb 0.05 --seed 1 >/dev/null || fail "shards"
python3 -c '
p = "shards/train-00001-of-00003.tfrecord"
b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0xFF; open(p, "wb").write(b)' || fail "corrupting a shard"
sed 's|^  dir: plant$|  dir: .|; s|^  kind: csv$|  kind: tfrecord\n  files: shards/*.tfrecord|; /test_csv/d' cfg.yaml >tf.yaml
expect_error "TFRecord CRC" "train-00001-of-00003.tfrecord: record" -- train --config tf.yaml
sed 's|^  kind: tfrecord$|  kind: tfrecord\n  on_bad_example: skip|' tf.yaml >tf_skip.yaml
if "$convoy" train --config tf_skip.yaml --out tf_skipped >log 2>err; then
  python3 -c '
import json
d = json.load(open("tf_skipped/summary.json"))["data"]
assert d["skipped_examples"] == 1 and "CRC" in d["skipped"][0], d
assert d["train_examples"] + d["validation_examples"] == 47, d' || fail "TFRecord skip: summary.json"
  echo "ok   TFRecord skip: $(sed -n 2p log)"
else
  fail "TFRecord skip: $(cat err)"
fi

echo "$failures failed"
[[ $failures -eq 0 ]]
