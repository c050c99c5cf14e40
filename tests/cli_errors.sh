#!/usr/bin/env bash
# Every input a user can get wrong: one line on stderr naming the thing, exit
# code 2, and no output files left behind.
set -u
convoy="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect_error NAME NEEDLE -- ARGS...: exit 2, one stderr line containing NEEDLE.
expect_error() {
  local name="$1" needle="$2"
  shift 3
  "$convoy" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [[ $rc -ne 2 || $lines -ne 1 ]] || ! grep -qF -- "$needle" "$tmp/err"; then
    echo "FAIL $name: rc=$rc, $lines stderr lines, wanted one naming '$needle':"
    cat "$tmp/err"
    failures=$((failures + 1))
  else
    echo "ok   $name: $(cat "$tmp/err")"
  fi
}

src=/usr/share/datasets/fashion-mnist
mkdir -p "$tmp/truncated" "$tmp/corrupt" "$tmp/missing"
for f in "$src"/*; do cp "$f" "$tmp/truncated/"; cp "$f" "$tmp/corrupt/"; done
head -c 20000 "$src/train-images-idx3-ubyte.gz" >"$tmp/truncated/train-images-idx3-ubyte.gz"
head -c 5000 /dev/urandom >"$tmp/corrupt/t10k-labels-idx1-ubyte.gz"
cp "$src"/t10k* "$tmp/missing/"

expect_error "missing data dir" "/nonexistent" -- train --data /nonexistent --out "$tmp/o1"
printf 'optimizer: {name: adam, lr: 0.001}\n' >"$tmp/adam.yaml"
expect_error "momentum with adam" "--momentum: the adam optimizer has no momentum" -- train --config "$tmp/adam.yaml" --momentum 0.9
expect_error "truncated IDX" "train-images-idx3-ubyte.gz" -- train --data "$tmp/truncated" --out "$tmp/o2"
expect_error "corrupt IDX" "t10k-labels-idx1-ubyte.gz" -- train --data "$tmp/corrupt" --out "$tmp/o3"
expect_error "missing IDX file" "train-images-idx3-ubyte" -- train --data "$tmp/missing"
expect_error "non-numeric flag" "--epochs" -- train --epochs many
expect_error "zero epochs" "--epochs" -- train --epochs 0
expect_error "negative lr" "--lr" -- train --lr -1
expect_error "unknown flag" "--bogus" -- train --bogus 3
expect_error "unknown command" "fly" -- fly
expect_error "unknown help topic" "help: unknown topic 'flags'; the one there is: config" -- help flags
expect_error "seed below 0" "--seed: 'training.seed' must be a whole number >= 0, got -1" -- train --seed -1
# A number past the type: the range, and the number as typed (it said 9.999999999999999e+22).
expect_error "seed 1e23" "--seed: 'training.seed' must be a whole number, 0 or more, at most 18446744073709551615, got 1e+23" -- train --seed 1e23
# A fraction for a key with fixed choices names the choices only (it added ", at most 2147483647").
printf 'data:\n  channels: 3.5\n' >"$tmp/channels.yaml"
expect_error "fraction for a key with choices" "'data.channels' must be a whole number, 1 or 3, got 3.5" -- \
  train --config "$tmp/channels.yaml"
expect_error "flag of a key out of range" "distributed.bucket_kib (--dist-bucket-kib) must be 0 (off) or positive, got -1" -- \
  train --dist-bucket-kib -1
# The flags' help and `convoy help config` come from the schema: its defaults, not hand-written ones.
"$convoy" train --help | grep -q -- "--dist-bucket-kib N .*\[16\]" || { echo "FAIL train --help: --dist-bucket-kib [16]"; failures=$((failures + 1)); }
"$convoy" help config | grep -q "^distributed.bucket_kib (--dist-bucket-kib): whole number, default 16; allowed: 0 (off) or positive" ||
  { echo "FAIL help config: distributed.bucket_kib"; failures=$((failures + 1)); }
expect_error "batch too large" "batch size" -- train --batch-size 70000 --epochs 1
expect_error "unwritable out" "/proc/convoy-out" -- train --out /proc/convoy-out --epochs 1

# A path of the wrong kind is named as what it is, with what to give instead
# (a file given as --data said "no such folder").
mkdir -p "$tmp/kinds/run" "$tmp/kinds/photos/cat" && printf 'image_id,a\nx,1\n' >"$tmp/kinds/labels.csv"
echo text >"$tmp/kinds/notes.txt" && cp "$tmp/kinds/notes.txt" "$tmp/kinds/photos/cat/a.jpg"
echo weights >"$tmp/kinds/run/model.safetensors"
expect_error "--data a CSV file" "labels.csv: is a file, not a folder; pass the folder that holds it: convoy reads DIR/train.csv" -- \
  train --data "$tmp/kinds/labels.csv"
expect_error "--data an image file" "a.jpg: is a file, not a folder; pass the folder above the class folders" -- \
  train --data "$tmp/kinds/photos/cat/a.jpg"
expect_error "--data another file" "notes.txt: is a file, not a folder; pass the folder that holds the data" -- \
  train --data "$tmp/kinds/notes.txt"
expect_error "--data a broken link" "is a broken symbolic link, not a folder" -- \
  train --data "$(ln -s "$tmp/kinds/gone" "$tmp/kinds/dangling" && echo "$tmp/kinds/dangling")"
expect_error "--resume a checkpoint file" "model.safetensors: is a file, not a folder; pass the folder that holds it" -- \
  train --resume "$tmp/kinds/run/model.safetensors"
for cmd in evaluate predict export; do
  expect_error "$cmd --checkpoint a file" "notes.txt: is a file, not a folder; pass the --out folder" -- \
    $cmd --checkpoint "$tmp/kinds/notes.txt" $([[ $cmd == export ]] && echo --onnx "$tmp/kinds/m.onnx")
done
expect_error "model.pretrained a folder" "model.pretrained: $tmp/kinds/run is a folder, not a weights file" -- \
  train --data "$tmp/kinds/photos" --set data.kind=folders --set model.pretrained="$tmp/kinds/run"
expect_error "shards --folder a file" "notes.txt: is a file, not a folder; pass a folder with one subfolder per class" -- \
  shards --folder "$tmp/kinds/notes.txt" --out "$tmp/kinds/s"
expect_error "shards --out a file" "notes.txt: is a file, not a folder; pass a new or existing folder as --out" -- \
  shards --folder "$tmp/kinds/photos" --out "$tmp/kinds/notes.txt" --on-bad-example skip
expect_error "demo-data --out a file" "notes.txt: is a file, not a folder; pass a new or empty --out DIR" -- \
  demo-data plant --out "$tmp/kinds/notes.txt"
expect_error "data.images a file" "the image folder of $tmp/kinds/labels.csv, $tmp/kinds/labels.csv: is a file, not a folder" -- \
  train --data "$tmp/kinds" --set data.kind=csv --set data.train_csv=labels.csv --set data.images=labels.csv

printf 'optimizer:\n  lrr: 0.1\n' >"$tmp/badkey.yaml"
printf '{"training": {"epochs": "ten"}}' >"$tmp/badtype.json"
printf 'model:\n  name: resnet9000\n' >"$tmp/badmodel.yaml"
expect_error "unknown config key" "optimizer.lrr" -- train --config "$tmp/badkey.yaml"
expect_error "config key names its file" "badkey.yaml" -- train --config "$tmp/badkey.yaml"
expect_error "wrong config type" "training.epochs" -- train --config "$tmp/badtype.json"
expect_error "unknown model" "resnet9000" -- train --config "$tmp/badmodel.yaml"
expect_error "missing config" "nope.yaml" -- train --config "$tmp/nope.yaml"
# The image data section (docs/workflow.md): keys and values checked like the rest.
printf 'data:\n  kind: csv\n  augmnt: {}\n' >"$tmp/data_key.yaml"
printf 'data:\n  kind: csv\n  augment: {flip: true}\n' >"$tmp/augment_key.yaml"
printf 'data:\n  kind: jpeg\n' >"$tmp/data_kind.yaml"
printf 'data:\n  kind: csv\n  on_bad_example: ignore\n' >"$tmp/bad_policy.yaml"
printf 'data:\n  kind: csv\n  width: "wide"\n' >"$tmp/data_type.yaml"
printf 'data:\n  kind: csv\n  classes: healthy\n' >"$tmp/data_list.yaml"
printf 'data:\n  kind: csv\n  augment: {rotation: 2}\n' >"$tmp/augment_range.yaml"
printf 'data:\n  kind: csv\n  validation_split: 1.5\n' >"$tmp/data_split.yaml"
mkdir -p "$tmp/none"  # the folder is there, its train.csv is not
printf 'data:\n  kind: csv\n  dir: %s/none\n' "$tmp" >"$tmp/data_missing.yaml"
expect_error "unknown data key" "data.augmnt" -- train --config "$tmp/data_key.yaml"
expect_error "unknown data key names its file" "data_key.yaml" -- train --config "$tmp/data_key.yaml"
expect_error "unknown augment key" "data.augment.flip" -- train --config "$tmp/augment_key.yaml"
expect_error "unknown data kind" "data.kind" -- train --config "$tmp/data_kind.yaml"
expect_error "unknown bad-example policy" "data.on_bad_example" -- train --config "$tmp/bad_policy.yaml"
expect_error "wrong data type" "data.width" -- train --config "$tmp/data_type.yaml"
expect_error "classes not a list" "data.classes" -- train --config "$tmp/data_list.yaml"
expect_error "augment out of range" "rotation" -- train --config "$tmp/augment_range.yaml"
expect_error "validation split out of range" "data.validation_split" -- train --config "$tmp/data_split.yaml"
expect_error "missing train.csv" "none/train.csv" -- train --config "$tmp/data_missing.yaml"
expect_error "resume without checkpoint" "checkpoint.safetensors" -- train --resume "$tmp"
expect_error "evaluate without checkpoint" "checkpoint.safetensors" -- evaluate --checkpoint "$tmp"
expect_error "bad progress mode" "progress" -- train --progress sideways
expect_error "unknown strategy" "--strategy" -- train --strategy gloo
expect_error "zero dist timeout" "--dist-timeout" -- train --dist-timeout 0
# 100000 threads that could not all start aborted the process ("terminate called
# without an active exception"); 10^9 reserved their handles: "out of memory".
expect_error "absurd thread count" "training.threads (--threads) 100000: more worker threads than convoy starts" -- \
  train --threads 100000 --epochs 1
expect_error "thread count 10^9" "training.threads (--threads) 1000000000: more worker" -- train --threads 1000000000
head -c 300 /dev/urandom >"$tmp/o4-checkpoint.safetensors"; mkdir -p "$tmp/o4"; mv "$tmp/o4-checkpoint.safetensors" "$tmp/o4/checkpoint.safetensors"
expect_error "predict without checkpoint" "checkpoint.safetensors" -- predict --checkpoint "$tmp" --input x --output y
expect_error "corrupt checkpoint" "checkpoint.safetensors" -- evaluate --checkpoint "$tmp/o4"

state_dict="$(dirname "$0")/fixtures/zoo_plant_cnn_state_dict.safetensors"
expect_error "unknown zoo model" "resnet9000" -- summary --model resnet9000
expect_error "state dict of another shape" "'classifier.weight' has shape [10, 256]" -- summary --model plant_cnn --weights "$state_dict"
expect_error "state dict of another architecture" "no tensor 'conv1.weight'" -- summary --model resnet18 --weights "$state_dict"
mkdir -p "$tmp/notdemo" && echo keep >"$tmp/notdemo/data.txt"
expect_error "demo-data unknown kind" "flowers" -- demo-data flowers --out "$tmp/d1"
expect_error "demo-data bad size" "--size" -- demo-data plant --out "$tmp/d2" --size 600by400
expect_error "demo-data foreign folder" "$tmp/notdemo" -- demo-data plant --out "$tmp/notdemo" --train 2 --test 1
# ---- bad input, parser by parser: truncated, wrong magic, huge declared
# sizes, negative counts, non-UTF-8 names, empty files ----
source "$(dirname "$0")/small_data.sh"
make_small_fashion "$tmp/small" 256 64
small=(train --data "$tmp/small" --batch-size 32 --epochs 1 --threads 1 --progress quiet)
bad_idx() {  # bad_idx NAME: a copy of the small data whose train images file is replaced by stdin
  mkdir -p "$tmp/$1"
  cp "$tmp/small"/* "$tmp/$1/"
  cat >"$tmp/$1/train-images-idx3-ubyte"
}
printf '' | bad_idx idx_empty
expect_error "empty IDX file" "idx_empty/train-images-idx3-ubyte" -- train --data "$tmp/idx_empty" --epochs 1
printf 'GIF89a\x1c\x00\x1c\x00' | bad_idx idx_magic
expect_error "IDX wrong magic" "not an IDX file" -- train --data "$tmp/idx_magic" --epochs 1
printf '\x00\x00\x08\x03\x7f\xff\xff\xff\x00\x00\x00\x1c\x00\x00\x00\x1c' | bad_idx idx_huge
expect_error "IDX huge declared count" "asks for more data" -- train --data "$tmp/idx_huge" --epochs 1
printf '\x00\x00\x08\x03\xff\xff\xff\xff\x00\x00\x00\x1c\x00\x00\x00\x1c\x00' | bad_idx idx_negative
expect_error "IDX count -1 (0xffffffff)" "asks for more data" -- train --data "$tmp/idx_negative" --epochs 1
head -c 1000 "$tmp/small/train-images-idx3-ubyte" | bad_idx idx_cut
expect_error "IDX truncated (raw)" "truncated" -- train --data "$tmp/idx_cut" --epochs 1
printf '\x00\x00\x0d\x03\x00\x00\x00\x01\x00\x00\x00\x1c\x00\x00\x00\x1c' | bad_idx idx_float
expect_error "IDX of floats (unsupported type)" "type 0x0d is not supported" -- train --data "$tmp/idx_float" --epochs 1
mkdir -p "$tmp/idx_label" && cp "$tmp/small"/* "$tmp/idx_label/"
printf '\x0c' | dd of="$tmp/idx_label/t10k-labels-idx1-ubyte" bs=1 seek=20 conv=notrunc status=none
expect_error "IDX label outside the classes" "label 12" -- train --data "$tmp/idx_label" --epochs 1
weird=$'\xff\xfe-data'
mkdir -p "$tmp/$weird" && cp "$tmp/small"/* "$tmp/$weird/"
expect_error "non-UTF-8 data folder name" "not valid UTF-8" -- train --data "$tmp/$weird" --epochs 1
expect_error "non-UTF-8 output folder name" "not valid UTF-8" -- "${small[@]}" --out "$tmp/$weird-out"

printf '{"training": {"epochs": 3' >"$tmp/cut.json"
head -c 64 /dev/urandom >"$tmp/binary.json"
printf '\x89PNG\r\n\x1a\n\x00\x00' >"$tmp/binary.yaml"
printf 'training:\n  batch_size: 9223372036854775807\n' >"$tmp/hugebatch.yaml"
printf 'training:\n  epochs: 1e400\n' >"$tmp/hugeepochs.yaml"
printf 'training:\n  batch_size: -5\n' >"$tmp/negbatch.yaml"
printf 'training:\n  checkpoint_every_steps: -1\n' >"$tmp/negevery.yaml"
printf 'training:\n  \xc3\x28: 1\n' >"$tmp/nonutf8key.yaml"
printf '{"data": {"dir": "\xff\xfe"}}' >"$tmp/nonutf8value.json"
expect_error "truncated JSON config" "cut.json: not valid JSON" -- train --config "$tmp/cut.json"
expect_error "binary JSON config" "binary.json" -- train --config "$tmp/binary.json"
expect_error "binary YAML config" "binary.yaml" -- train --config "$tmp/binary.yaml"
expect_error "huge batch size in a config" "batch size 9223372036854775807 needs" -- train --config "$tmp/hugebatch.yaml" --data "$tmp/small"
expect_error "huge epochs in a config" "training.epochs" -- train --config "$tmp/hugeepochs.yaml"
expect_error "negative batch size in a config" "training.batch_size" -- train --config "$tmp/negbatch.yaml"
expect_error "negative checkpoint_every_steps" "checkpoint_every_steps" -- train --config "$tmp/negevery.yaml"
expect_error "non-UTF-8 config key" "unknown key 'training." -- train --config "$tmp/nonutf8key.yaml"
expect_error "non-UTF-8 config value" "nonutf8value.json" -- train --config "$tmp/nonutf8value.json"
expect_error "bad --on-nan" "on_nan" -- train --on-nan ignore
# An empty path (an unset shell variable) is refused: '--resume ""' started a new run,
# '--config ""' trained the defaults, '--input ""' predicted the run's test CSV.
for args in "train --resume" "train --config" "train --out" "train --data" "evaluate --checkpoint" \
  "predict --checkpoint $tmp --input" "predict --checkpoint $tmp --output" "shards --out" "demo-data plant --out"; do
  # shellcheck disable=SC2086
  expect_error "$args ''" "${args##* }: the path is empty" -- $args ''
done
# Two YAML documents: the second was silently dropped.
printf 'training: {epochs: 1}\n---\ntraining: {epochs: 5}\n' >"$tmp/two_docs.yaml"
expect_error "YAML config of two documents" "two_docs.yaml: holds 2 YAML documents" -- train --config "$tmp/two_docs.yaml"
# Numbers no float or double holds: said as such (it said "must be a number, got "1e999""),
# for every float key, lists too, checked once where typed values are read.
expect_error "lr 1e999" "'optimizer.lr' must be a finite number (a double: at most 1.8e+308" -- train --lr 1e999
expect_error "lr 1e-999" "'optimizer.lr' must be a finite number" -- train --set optimizer.lr=1e-999
expect_error "data.mean [inf]" "'data.mean' must hold finite numbers" -- train --set 'data.mean=[0.5, .inf]'
printf 'optimizer: {lr: 1e999}\n' >"$tmp/lr_overflow.yaml"
expect_error "lr 1e999 in YAML" "lr_overflow.yaml: 'optimizer.lr' must be a finite number" -- train --config "$tmp/lr_overflow.yaml"
# An Adam eps of 1e300 trained nothing and said nothing.
expect_error "optimizer eps above 1" "optimizer.eps must be above 0 and at most 1" -- train --set optimizer.eps=1e300
# Batch norm options that break the statistics: refused wherever the layer list is read.
printf 'model:\n  layers: [{type: conv2d, filters: 4, kernel: 3}, {type: batch_norm, eps: 0}, flatten, {type: dense, units: 10}, log_softmax]\n' >"$tmp/bn_eps.yaml"
printf 'model:\n  layers: [{type: conv2d, filters: 4, kernel: 3}, {type: batch_norm, momentum: 1.5}, flatten, {type: dense, units: 10}, log_softmax]\n' >"$tmp/bn_momentum.yaml"
expect_error "batch norm eps 0 (summary)" "'model.layers[1].eps' must be positive and finite" -- summary --config "$tmp/bn_eps.yaml"
expect_error "batch norm eps 0 (train)" "'model.layers[1].eps' must be positive and finite" -- train --config "$tmp/bn_eps.yaml"
expect_error "batch norm momentum 1.5" "'model.layers[1].momentum' must be in [0, 1]" -- summary --config "$tmp/bn_momentum.yaml"
# Model shapes that vanish or overflow: refused where the model is built
# (nn::Model), naming the layer and what to do; a padding of 1e9 died of SIGFPE.
printf 'model:\n  layers: [max_pool2d_k2, max_pool2d_k2, max_pool2d_k2, max_pool2d_k2, max_pool2d_k2, flatten, {type: dense, units: 10}]\n' |
  sed 's/max_pool2d_k2/{type: max_pool2d, kernel: 2}/g' >"$tmp/pools.yaml"
printf 'model:\n  layers: [{type: conv2d, filters: 4, kernel: 3, padding: 1000000000}, flatten, {type: dense, units: 10}]\n' >"$tmp/pad.yaml"
expect_error "too many pools for the image" "max_pool2d_4: kernel 2 does not fit input size 1 with padding 0; use a smaller kernel" -- \
  summary --config "$tmp/pools.yaml"
expect_error "padding 1e9 (summary)" "conv2d_0's output (per example) [4, 2000000026, 2000000026] would hold" -- summary --config "$tmp/pad.yaml"
expect_error "padding 1e9 (train)" "more than the 2^31 (8 GiB of floats) convoy takes in one tensor" -- train --config "$tmp/pad.yaml" --epochs 1
# Whole-number flags from 1 up: PositiveNumber took 0.5 and values past an int.
expect_error "summary --classes past an int" "--classes: Value 99999999999 not in range 1 to 2147483647" -- \
  summary --model plant_cnn --classes 99999999999
expect_error "summary --image-size 3" "--image-size: Value 3 not in range 8 to 4096" -- summary --model plant_cnn --image-size 3
expect_error "summary seed_cnn --image-size (ignored before)" "seed_cnn: its 1x28x28 input and 10 classes are fixed" -- \
  summary --model seed_cnn --image-size 32
expect_error "predict --top-k 0" "--top-k: Value 0 not in range 1" -- predict --checkpoint "$tmp" --top-k 0
expect_error "checkpoint every steps without --out" "needs an output folder" -- "${small[@]}" --checkpoint-every-steps 5

# A learning rate that blows the weights up: stopped at the step (on_nan: stop),
# the last good weights written, one line.
expect_error "NaN blow-up" "NaN or Inf at epoch 1 step" -- "${small[@]}" --lr 1e20 --out "$tmp/nan"
[[ -e "$tmp/nan/model.safetensors" ]] || { echo "FAIL NaN blow-up: no model.safetensors with the last good weights"; failures=$((failures + 1)); }

# Checkpoints (safetensors): every kind of damage is one line, exit 2.
"$convoy" "${small[@]}" --out "$tmp/good" >/dev/null 2>&1 || echo "FAIL: could not make a checkpoint to damage"
# A Fashion-MNIST run predicts an IDX file: --input is needed (an image run reads its test CSV).
expect_error "predict missing input" "--input" -- predict --checkpoint "$tmp/good"
expect_error "export --onnx -" "--onnx -: export writes a file, not standard output" -- export --checkpoint "$tmp/good" --onnx -
expect_error "export --onnx ''" "--onnx: the path is empty" -- export --checkpoint "$tmp/good" --onnx ''
# summary's paths were read as not given ('' named no file): refused as the other path flags are.
expect_error "summary --onnx ''" "--onnx: the path is empty" -- summary --onnx ''
expect_error "summary --weights ''" "--weights: the path is empty" -- summary --model seed_cnn --weights ''
[[ -e ./- || -e "$tmp/good/-" ]] && { echo "FAIL export --onnx -: wrote a file named -"; failures=$((failures + 1)); }
# --resume --epochs 0 ran to the run's own end (--epochs at the epochs trained: early_stopping.sh).
expect_error "resume --epochs 0" "--epochs 0: --resume trains on to epoch N" -- train --resume "$tmp/good" --epochs 0
bad_checkpoint() {  # bad_checkpoint NAME: a run folder whose only checkpoint is stdin
  mkdir -p "$tmp/$1"
  cat >"$tmp/$1/checkpoint.safetensors"
}
le64() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x00\\x00\\x00\\x00\\x00\\x00"; }
header() { le64 ${#1}; printf '%s' "$1"; }
printf '' | bad_checkpoint ck_empty
expect_error "empty checkpoint" "ck_empty/checkpoint.safetensors: empty file" -- evaluate --checkpoint "$tmp/ck_empty"
head -c 2000 "$tmp/good/checkpoint.safetensors" | bad_checkpoint ck_cut
expect_error "truncated checkpoint" "ck_cut/checkpoint.safetensors" -- evaluate --checkpoint "$tmp/ck_cut"
printf '\xff\xff\xff\xff\xff\xff\xff\x7f{}' | bad_checkpoint ck_hugeheader
expect_error "checkpoint with a huge header length" "header length" -- evaluate --checkpoint "$tmp/ck_hugeheader"
{ header '{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}'; printf 'abcd'; } | bad_checkpoint ck_hugeshape
expect_error "checkpoint with a huge declared shape" "needs more data than the file holds" -- evaluate --checkpoint "$tmp/ck_hugeshape"
{ header '{"w":{"dtype":"F32","shape":[-3],"data_offsets":[0,4]}}'; printf 'abcd'; } | bad_checkpoint ck_negative
expect_error "checkpoint with a negative size" "not a whole number >= 0" -- evaluate --checkpoint "$tmp/ck_negative"
{ header $'{"w\xff":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'; printf 'abcd'; } | bad_checkpoint ck_nonutf8
expect_error "checkpoint with a non-UTF-8 tensor name" "bad safetensors header" -- evaluate --checkpoint "$tmp/ck_nonutf8"
size=$(stat -c %s "$tmp/good/checkpoint.safetensors")
{ head -c $((size - 100)) "$tmp/good/checkpoint.safetensors"; printf '\x01'; tail -c 99 "$tmp/good/checkpoint.safetensors"; } | bad_checkpoint ck_flipped
expect_error "checkpoint failing its checksum" "checksum mismatch" -- evaluate --checkpoint "$tmp/ck_flipped"
cp "$tmp/ck_flipped/checkpoint.safetensors" "$tmp/ck_flipped/checkpoint.prev.safetensors"
expect_error "checkpoint and its predecessor both damaged" "checkpoint.prev.safetensors" -- train --resume "$tmp/ck_flipped"

for d in o1 o2 o3; do
  if [[ -e "$tmp/$d/summary.json" ]]; then
    echo "FAIL: $d/summary.json written by a failed run"
    failures=$((failures + 1))
  fi
done
echo "$failures failed"
[[ $failures -eq 0 ]]
