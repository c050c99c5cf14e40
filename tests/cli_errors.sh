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
expect_error "truncated IDX" "train-images-idx3-ubyte.gz" -- train --data "$tmp/truncated" --out "$tmp/o2"
expect_error "corrupt IDX" "t10k-labels-idx1-ubyte.gz" -- train --data "$tmp/corrupt" --out "$tmp/o3"
expect_error "missing IDX file" "train-images-idx3-ubyte" -- train --data "$tmp/missing"
expect_error "non-numeric flag" "--epochs" -- train --epochs many
expect_error "zero epochs" "--epochs" -- train --epochs 0
expect_error "negative lr" "--lr" -- train --lr -1
expect_error "unknown flag" "--bogus" -- train --bogus 3
expect_error "unknown command" "fly" -- fly
expect_error "batch too large" "batch size" -- train --batch-size 70000 --epochs 1
expect_error "unwritable out" "/proc/convoy-out" -- train --out /proc/convoy-out --epochs 1

printf 'optimizer:\n  lrr: 0.1\n' >"$tmp/badkey.yaml"
printf '{"training": {"epochs": "ten"}}' >"$tmp/badtype.json"
printf 'model:\n  name: resnet9000\n' >"$tmp/badmodel.yaml"
expect_error "unknown config key" "optimizer.lrr" -- train --config "$tmp/badkey.yaml"
expect_error "config key names its file" "badkey.yaml" -- train --config "$tmp/badkey.yaml"
expect_error "wrong config type" "training.epochs" -- train --config "$tmp/badtype.json"
expect_error "unknown model" "resnet9000" -- train --config "$tmp/badmodel.yaml"
expect_error "missing config" "nope.yaml" -- train --config "$tmp/nope.yaml"
expect_error "resume without checkpoint" "checkpoint.safetensors" -- train --resume "$tmp"
expect_error "evaluate without checkpoint" "checkpoint.safetensors" -- evaluate --checkpoint "$tmp"
expect_error "bad progress mode" "progress" -- train --progress sideways
head -c 300 /dev/urandom >"$tmp/o4-checkpoint.safetensors"; mkdir -p "$tmp/o4"; mv "$tmp/o4-checkpoint.safetensors" "$tmp/o4/checkpoint.safetensors"
expect_error "predict without checkpoint" "checkpoint.safetensors" -- predict --checkpoint "$tmp" --input x --output y
expect_error "predict missing input" "--input" -- predict --checkpoint "$tmp"
expect_error "corrupt checkpoint" "checkpoint.safetensors" -- evaluate --checkpoint "$tmp/o4"

state_dict="$(dirname "$0")/fixtures/zoo_plant_cnn_state_dict.safetensors"
expect_error "unknown zoo model" "resnet9000" -- summary --model resnet9000
expect_error "state dict of another shape" "'classifier.weight' has shape [10, 256]" -- summary --model plant_cnn --weights "$state_dict"
expect_error "state dict of another architecture" "no tensor 'conv1.weight'" -- summary --model resnet18 --weights "$state_dict"

for d in o1 o2 o3; do
  if [[ -e "$tmp/$d/summary.json" ]]; then
    echo "FAIL: $d/summary.json written by a failed run"
    failures=$((failures + 1))
  fi
done
echo "$failures failed"
[[ $failures -eq 0 ]]
