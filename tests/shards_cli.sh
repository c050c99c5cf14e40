#!/usr/bin/env bash
# `convoy shards` from the command line: class folders and a CSV manifest
# become shards; each mistake is one stderr line naming the thing, exit 2.
set -u
convoy="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# expect_error NAME NEEDLE -- ARGS...: exit 2, one stderr line containing NEEDLE.
expect_error() {
  local name="$1" needle="$2"
  shift 3
  "$convoy" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(wc -l <"$tmp/err")
  if [[ $rc -ne 2 || $lines -ne 1 ]] || ! grep -qF -- "$needle" "$tmp/err"; then
    fail "$name: rc=$rc, $lines stderr lines, wanted one naming '$needle':"
    cat "$tmp/err"
  else
    echo "ok   $name: $(cat "$tmp/err")"
  fi
}

# A class-folder tree: 3 classes x 8 images of 20 KB.
for c in apple banana cherry; do
  mkdir -p "$tmp/tree/$c"
  for i in 0 1 2 3 4 5 6 7; do head -c 20000 /dev/urandom >"$tmp/tree/$c/$i.jpg"; done
done
if "$convoy" shards --folder "$tmp/tree" --out "$tmp/s" --shard-mb 0.1 --seed 3 >"$tmp/out" 2>"$tmp/err"; then
  n=$(ls "$tmp/s"/train-*-of-*.tfrecord | wc -l)
  [[ $n -ge 4 && $n -le 6 ]] || fail "folder: $n shards for 480 KB at 0.1 MB each"
  ls "$tmp/s/train-00000-of-0000$n.tfrecord" >/dev/null || fail "folder: shard names"
  [[ "$(cat "$tmp/s/classes.txt")" == $'apple\nbanana\ncherry' ]] || fail "folder: classes.txt"
  grep -q "24 examples" "$tmp/out" || fail "folder: summary line: $(cat "$tmp/out")"
  echo "ok   folder: $(cat "$tmp/out")"
else
  fail "folder: $(cat "$tmp/err")"
fi

# A Plant Pathology layout with one row whose image is missing.
mkdir -p "$tmp/pp/images"
printf 'image_id,healthy,multiple_diseases,rust,scab\r\nTrain_0,1,0,0,0\r\nTrain_1,0,0,1,0\r\nTrain_2,0,0,0,1\r\n' \
  >"$tmp/pp/train.csv"
head -c 5000 /dev/urandom >"$tmp/pp/images/Train_0.jpg"
head -c 5000 /dev/urandom >"$tmp/pp/images/Train_2.jpg"
expect_error "missing image" "train.csv: line 3: image file $tmp/pp/images/Train_1.jpg is missing" -- \
  shards --csv "$tmp/pp/train.csv" --out "$tmp/pp_out"
[[ -z "$(ls -A "$tmp/pp_out" 2>/dev/null)" ]] || fail "missing image: output left behind: $(ls "$tmp/pp_out")"
if "$convoy" shards --csv "$tmp/pp/train.csv" --out "$tmp/pp_out" --on-bad-example skip --gzip \
    >"$tmp/out" 2>"$tmp/err"; then
  grep -q "skipped 1 bad row: line 3" "$tmp/err" || fail "skip: no skip line: $(cat "$tmp/err")"
  grep -q "2 examples" "$tmp/out" || fail "skip: summary: $(cat "$tmp/out")"
  [[ -f "$tmp/pp_out/train-00000-of-00001.tfrecord.gz" ]] || fail "skip: gzip shard name"
  echo "ok   skip: $(cat "$tmp/err")"
else
  fail "skip: $(cat "$tmp/err")"
fi

expect_error "csv and folder" "either --csv" -- shards --csv "$tmp/pp/train.csv" --folder "$tmp/tree" --out "$tmp/x"
expect_error "no source" "either --csv" -- shards --out "$tmp/x"
expect_error "bad policy" "--on-bad-example" -- shards --csv "$tmp/pp/train.csv" --out "$tmp/x" --on-bad-example maybe
expect_error "missing folder" "$tmp/nope" -- shards --folder "$tmp/nope" --out "$tmp/x"
expect_error "unknown class column" "no column 'blight'" -- \
  shards --csv "$tmp/pp/train.csv" --classes healthy,blight --out "$tmp/x"
expect_error "zero shard size" "shard size" -- shards --folder "$tmp/tree" --out "$tmp/x" --shard-mb 0
# The output folder is placed as train's is: shards inside --folder were the next run's class 'shards'.
expect_error "--out inside --folder" "shards --out $tmp/tree/shards: inside the data folder" -- \
  shards --folder "$tmp/tree" --out "$tmp/tree/shards"
[[ -e "$tmp/tree/shards" ]] && fail "--out inside --folder: made $tmp/tree/shards"
expect_error "--out inside the CSV's images" "inside the data folder" -- shards --csv "$tmp/pp/train.csv" --out "$tmp/pp/images/s"
expect_error "--out the root" "is the file system's root" -- shards --folder "$tmp/tree" --out /

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
