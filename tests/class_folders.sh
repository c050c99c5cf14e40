#!/usr/bin/env bash
# From a folder of photos to predictions with no config (issue 19): class
# folders of colour JPEGs made here (convoy demo-data's photos, sorted into
# one folder per class), `convoy train --data DIR` choosing the input size,
# model, loss and optimizer from the data, then `convoy predict` on one
# image, on the folder and on a test CSV; wrong inputs are one line, exit 2.
set -u
convoy="$1"
source "$(dirname "$0")/cli_test_lib.sh"

# check_rows FILE COLUMNS: every row after the header has COLUMNS probabilities summing to 1.
check_rows() {
  local file="$1" columns="$2" bad
  bad=$(awk -F, -v n="$columns" 'NR > 1 { s = 0; for (i = 2; i <= NF; ++i) { if ($i < 0 || $i > 1) s = -9; s += $i }
                                          if (NF != n + 1 || s < 0.9999 || s > 1.0001) print NR ": " $0 }' "$file")
  [[ -z "$bad" ]] || fail "$file: rows not $columns probabilities summing to 1: $bad"
}

# 3 classes of 96x64 colour JPEGs: the demo's photos, by their label, without its CSV.
"$convoy" demo-data plant --out demo --train 40 --test 4 --size 96x64 --seed 3 >/dev/null || fail "demo-data"
awk -F, 'NR > 1 { c = $2 == 1 ? "healthy" : $4 == 1 ? "rust" : $5 == 1 ? "scab" : ""; if (c != "") print $1, c }' \
  demo/train.csv | while read -r id class; do
  mkdir -p "photos/$class" && cp "demo/images/$id.jpg" "photos/$class/$id.jpg"
done
mkdir -p photos/healthy/more && mv "$(ls photos/healthy/*.jpg | tail -1)" photos/healthy/more/  # read too
mv "$(ls photos/healthy/*.jpg | head -1)" photos/healthy/x.jpg
images=$(find photos -name '*.jpg' | wc -l)

if "$convoy" train --data photos --epochs 2 --threads 1 --progress lines --out O >log 2>err; then
  first=$(head -1 log)
  for want in "class folders, 3 classes (healthy, rust, scab), $images images" "model plant_cnn" \
              "loss categorical_crossentropy from logits" "input 3x64x96" "adam lr 0.001"; do
    [[ "$first" == *"$want"* ]] || fail "train: the first line does not say '$want': $first"
  done
  echo "ok   train: $first"
  plain_train=$(sed -n 's/.*plant_cnn on photos (\([0-9]*\) train.*/\1/p' log)
  # The final block: the metric Kaggle judges by and each class's scores, in the console and the report.
  grep -Eq '^validation \([0-9]+ images\): accuracy [0-9.]+%, mean ROC AUC [0-9.]+' log || fail "no final block: $(tail -6 log)"
  for class in healthy rust scab; do
    grep -Eq "^  $class +[0-9.]+ +[0-9.]+ +[0-9.]+ +([0-9.]+|n/a) +[0-9]+$" log || fail "final block: no row for $class"
    grep -q "<td style=\"text-align:left\">$class</td>" O/report.html || fail "report.html: no row for $class"
  done
  grep -q "Mean ROC AUC" O/report.html || fail "report.html: no mean ROC AUC"
  python3 - <<'PY' || fail "summary.json"
import json
s = json.load(open("O/summary.json"))
assert s["data"]["kind"] == "folders" and s["data"]["classes"] == ["healthy", "rust", "scab"], s["data"]
assert len(s["history"]) == 2, s["history"]
assert s["conv_algo"] == "auto", s.get("conv_algo")  # it changes the bits: recorded
PY
  [[ -z "$(find . -name '*.yaml' -o -name '*.yml' -o -name '*.json' ! -path './O/*')" ]] || fail "a config file was written"
else
  fail "train: $(cat err)"
fi

# One image: O/predictions.csv by default, and the path printed.
if "$convoy" predict --checkpoint O --input photos/healthy/x.jpg --top-k 2 >log 2>err; then
  [[ "$(head -1 O/predictions.csv)" == "file,healthy,rust,scab" ]] || fail "predictions.csv header: $(head -1 O/predictions.csv)"
  [[ $(wc -l <O/predictions.csv) -eq 2 && "$(sed -n 2p O/predictions.csv)" == photos/healthy/x.jpg,* ]] ||
    fail "one image: $(cat O/predictions.csv)"
  check_rows O/predictions.csv 3
  grep -q "^wrote O/predictions.csv (1 row" log || fail "one image: the output path not printed: $(cat log)"
  grep -Eq '^photos/healthy/x.jpg +(healthy|rust|scab) 0\.[0-9]{3}  (healthy|rust|scab) 0\.[0-9]{3}$' log ||
    fail "--top-k 2: $(head -1 log)"
  echo "ok   predict one image: $(head -1 log)"
else
  fail "predict one image: $(cat err)"
fi

# The folder, recursively: one row per image, named relative to it.
if "$convoy" predict --checkpoint O --input photos --output all.csv >log 2>err; then
  [[ $(($(wc -l <all.csv) - 1)) -eq $images ]] || fail "folder: $(($(wc -l <all.csv) - 1)) rows, $images images"
  grep -q "^healthy/x.jpg," all.csv && grep -q "^healthy/more/" all.csv || fail "folder: ids $(cut -d, -f1 all.csv | head -3)"
  check_rows all.csv 3
  # The same image gives the same probabilities alone and in a batch.
  [[ "$(grep '^healthy/x.jpg,' all.csv | cut -d, -f2-)" == "$(sed -n 2p O/predictions.csv | cut -d, -f2-)" ]] ||
    fail "folder: x.jpg differs from its own prediction"
  echo "ok   predict folder: $(cat log)"
else
  fail "predict folder: $(cat err)"
fi

# A Kaggle test CSV (ids, images beside it in images/): the submission layout.
if "$convoy" predict --checkpoint O --input demo/test.csv >log 2>err; then
  [[ "$(head -1 O/submission.csv)" == "image_id,healthy,rust,scab" && $(wc -l <O/submission.csv) -eq 5 ]] ||
    fail "test CSV: $(head -2 O/submission.csv)"
  check_rows O/submission.csv 3
  echo "ok   predict test CSV: $(cat log)"
else
  fail "predict test CSV: $(cat err)"
fi

# Overrides, and errors: one line each, exit 2.
if "$convoy" train --data photos --epochs 1 --threads 1 --image-size 48 --optimizer sgd --progress lines \
  --set training.conv_algo=direct --out O48 >log 2>err; then
  grep -q '"conv_algo": "direct"' O48/summary.json || fail "summary.json: no conv_algo direct"
  first=$(head -1 log)
  [[ "$first" == *"input 3x48x48"* && "$first" != *adam* ]] || fail "--image-size 48 --optimizer sgd: $first"
  grep -q "batch 8, SGD lr 0.01" log || fail "--optimizer sgd: $(grep 'plant_cnn on' log)"
  echo "ok   --image-size 48 --optimizer sgd: $first"
else
  fail "--image-size: $(cat err)"
fi
# data.oversample: the training split's classes repeated up to the largest's count.
if "$convoy" train --data photos --epochs 1 --threads 1 --set data.oversample=true --progress lines >log 2>err; then
  train=$(sed -n 's/.*plant_cnn on photos (\([0-9]*\) train.*/\1/p' log)
  [[ -n "$train" && $train -gt ${plain_train:-999} ]] || fail "oversample: $train training images, $plain_train without"
  echo "ok   oversample: $train training images instead of $plain_train"
else
  fail "oversample: $(cat err)"
fi
# data.class_weight: each example's loss weighted by its class's weight. Adam
# ignores a uniform scale of the gradients, so weights of 2 for every class
# train the same steps and report twice the loss.
epoch_loss() { sed -n 's/^epoch   1\/1  loss \([0-9.]*\).*/\1/p' "$1"; }
"$convoy" train --data photos --epochs 1 --threads 1 --progress lines --out W1 >w1.log 2>err || fail "unweighted: $(cat err)"
"$convoy" train --data photos --epochs 1 --threads 1 --progress lines --out W2 \
  --set 'data.class_weight={healthy: 2, rust: 2, scab: 2}' >w2.log 2>err || fail "class_weight: $(cat err)"
grep -q "^class weights in the loss: healthy 2, rust 2, scab 2$" w2.log || fail "class_weight: no line naming the weights"
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); assert abs(b / a - 2) < 0.01, (a, b)" \
  "$(epoch_loss w1.log)" "$(epoch_loss w2.log)" || fail "class_weight 2: loss $(epoch_loss w2.log), unweighted $(epoch_loss w1.log)"
"$convoy" train --data photos --epochs 1 --threads 1 --progress lines --set data.class_weight=balanced >log 2>err ||
  fail "balanced: $(cat err)"
grep -Eq "^class weights in the loss: healthy [0-9.]+, rust [0-9.]+, scab [0-9.]+$" log || fail "balanced: $(sed -n 2p log)"
echo "ok   class_weight: loss $(epoch_loss w2.log) with weights 2, $(epoch_loss w1.log) without; $(grep '^class weights' log)"
expect_error "class_weight of no class" "'cats' is not a class of the data; its classes: healthy, rust, scab" \
  -- train --data photos --threads 1 --set 'data.class_weight={cats: 3}'

mkdir -p notdata && echo hi >notdata/a.txt
expect_error "unrecognised data" "class folders" -- train --data notdata
expect_error "model meets data" "model 'seed_cnn' takes [1, 28, 28] inputs but the data's examples are [3, 64, 96]" \
  -- train --data photos --model seed_cnn --threads 1
expect_error "loss meets model" "reads log-probabilities but model 'plant_cnn' ends in logits" \
  -- train --data photos --set loss.name=nll --threads 1
expect_error "--set typo" "did you mean 'optimizer.lr'" -- train --data photos --set optimizer.learning_rate=0.1
expect_error "conv_algo" "convolution algorithm 'fast' is not one: use auto, direct or winograd" \
  -- train --data photos --set training.conv_algo=fast
expect_error "predict: no such input" "--input nope.jpg: no such file or folder" -- predict --checkpoint O --input nope.jpg
expect_error "predict: not an image" "neither an image" -- predict --checkpoint O --input notdata/a.txt
expect_error "predict: empty folder" "no images" -- predict --checkpoint O --input notdata

# Checked before anything trains, the scratch comparison included; a config's
# paths are relative to its folder.
mkdir -p cfg && cat >cfg/transfer.yaml <<'YAML'
data: {dir: ../photos, kind: folders}
model: {name: plant_cnn, pretrained: backbone.safetensors}
transfer: {freeze_epochs: 3, compare_with_scratch: true}
training: {epochs: 5, batch_size: 8, threads: 1}
YAML
expect_error "pretrained file, before the scratch run" "model.pretrained: cfg/backbone.safetensors is missing" \
  -- train --config cfg/transfer.yaml --out T
[[ ! -e T ]] || fail "a failed check left T behind: $(ls T)"
grep -q "for comparison" out && fail "the scratch comparison started: $(cat out)"
expect_error "freeze_epochs past --epochs" "transfer.freeze_epochs must be between 0 and training.epochs (2)" \
  -- train --config cfg/transfer.yaml --epochs 2 --out T

finish class-folder
