#!/usr/bin/env bash
# A folder of one's own photos as people really have them (issue: the
# careless-input sweep): what a Mac, Windows or Jupyter leaves beside the
# photos, a class folder left empty, a folder name from a Latin-1 system, a
# link that leads out of the folder. Each case failed before its fix (a
# hidden ._photo.jpg was read as an image, an empty folder became a class
# trained on nothing, a non-UTF-8 name was an internal error, predict read
# through a link out of its folder).
set -u
convoy="$1"
source "$(dirname "$0")/cli_test_lib.sh"
args=(--epochs 1 --threads 1)

# Two classes of 96x64 colour JPEGs, the demo's photos.
"$convoy" demo-data plant --out demo --train 24 --test 2 --size 96x64 --seed 3 >/dev/null || fail "demo-data"
mkdir -p base/cat base/dog
i=0
for f in demo/images/Train_*.jpg; do
  i=$((i + 1)); if ((i % 2)); then cp "$f" base/cat/; else cp "$f" base/dog/; fi
done
images=$(find base -name '*.jpg' | wc -l)

# 1. Hidden entries are not photos: .DS_Store, macOS's ._x.jpg (AppleDouble,
#    not a JPEG), __MACOSX/ from unzipping, .ipynb_checkpoints/; Thumbs.db is
#    no image name. Neither a class nor an image, in train nor in predict.
cp -r base hidden
echo junk >hidden/.DS_Store && echo junk >hidden/cat/.DS_Store && echo junk >hidden/cat/Thumbs.db
echo junk >hidden/dog/._Train_1.jpg
mkdir -p hidden/__MACOSX/cat hidden/.ipynb_checkpoints hidden/dog/.thumbnails
echo junk >hidden/__MACOSX/cat/._Train_0.jpg && cp base/cat/Train_0.jpg hidden/dog/.thumbnails/
if "$convoy" train --data hidden "${args[@]}" --progress lines --out hidden_run >log 2>err; then
  grep -q "2 classes (cat, dog), $images images" log || fail "hidden: not 2 classes of $images images: $(head -1 log)"
  if "$convoy" predict --checkpoint hidden_run --input hidden --output hidden.csv >/dev/null 2>err; then
    if [[ $(($(wc -l <hidden.csv) - 1)) -eq $images && ! -s err ]]; then
      echo "ok   hidden files and folders are left out of train and predict"
    else
      fail "hidden: predict wrote $(($(wc -l <hidden.csv) - 1)) rows for $images photos: $(head -c 300 err)"
    fi
  else
    fail "hidden: predict: $(cat err)"
  fi
else
  fail "hidden: train: $(cat err)"
fi

# 2. An empty class folder is no class: one line (under skip: left out, named).
cp -r base empty && mkdir empty/bird
expect_error "an empty class folder" "empty: bird/: a class folder with no images (.jpg, .jpeg, .png); add its images, or remove the folder" -- \
  train --data empty "${args[@]}" --progress quiet
if "$convoy" train --data empty "${args[@]}" --progress lines --set data.on_bad_example=skip >log 2>err; then
  if grep -q "2 classes (cat, dog)" log && grep -q "bird/: a class folder with no images" log; then
    echo "ok   an empty class folder under skip: left out and named"
  else
    fail "an empty class folder under skip: $(head -3 log)"
  fi
else
  fail "an empty class folder under skip: $(cat err)"
fi

# 3. A class folder named in Latin-1 (not UTF-8): one line naming it, escaped.
cp -r base latin1 && mv latin1/dog "latin1/$(printf 'b\xe9e')"
expect_error "a class folder name that is not UTF-8" "latin1, a class folder: class name 'b\\xe9e' is not UTF-8 text" -- \
  train --data latin1 "${args[@]}" --progress quiet

# 4. A bad photo whose file name is not UTF-8, skipped: summary.json is still written (as JSON).
cp -r base latin1_file && echo junk >"latin1_file/dog/$(printf 'caf\xe9.jpg')"
if "$convoy" train --data latin1_file "${args[@]}" --progress quiet --set data.on_bad_example=skip --out latin1_run >/dev/null 2>err; then
  if python3 -c "import json,sys; d=json.load(open('latin1_run/summary.json'))['data']; sys.exit(d['skipped_examples'] != 1)"; then
    echo "ok   a skipped photo with a non-UTF-8 name: the run ends, summary.json names it"
  else
    fail "a skipped non-UTF-8 file name: summary.json unreadable or not counting it"
  fi
else
  fail "a skipped non-UTF-8 file name: $(cat err)"
fi

# 5. predict on a folder: a link out of it is not followed (a run's data set
#    is held to its root; so is predict's folder), it is named and left out.
cp -r base links && ln -s /etc/passwd links/cat/passwd.jpg && ln -s "$PWD/demo/images/Test_0.jpg" links/dog/outside.jpg
if "$convoy" predict --checkpoint hidden_run --input links --output links.csv >/dev/null 2>err; then
  if [[ $(($(wc -l <links.csv) - 1)) -eq $images ]] && ! grep -q "passwd\|outside" links.csv &&
    [[ $(grep -c "leads outside links" err) -eq 2 ]]; then
    echo "ok   predict leaves out (and names) links that lead out of its folder"
  else
    fail "predict with links out of the folder: $(wc -l <links.csv) lines; $(head -c 400 err)"
  fi
else
  fail "predict with links out of the folder read through them: $(cat err)"
fi

# 6. A labels CSV whose ids are whole file names ("Train_0.jpg"): the reason
#    and the fix in one line (it said "no usable rows (all 24 were bad)"),
#    and the fix works without a config (the probe ignored data.extension).
mkdir -p named/images && cp demo/images/Train_*.jpg named/images/
awk -F, 'BEGIN { OFS = "," } NR > 1 { $1 = $1 ".jpg" } { print }' demo/train.csv >named/train.csv
expect_error "a labels CSV of whole file names" "the ids are whole file names already: set data.extension to ''" -- \
  train --data named "${args[@]}" --progress quiet
if "$convoy" train --data named "${args[@]}" --progress quiet --batch-size 8 --set data.extension= >/dev/null 2>err; then
  echo "ok   --set data.extension= reads ids that are file names"
else
  fail "--set data.extension= without a config: $(cat err)"
fi

# 7. --output / --onnx onto a file of the user's: the run's checkpoint or
#    weights, a labels CSV, are never replaced (they were); an earlier
#    predictions CSV of the run is.
cp hidden_run/checkpoint.safetensors kept.safetensors && cp hidden_run/model.safetensors kept_model.safetensors
expect_error "predict --output onto the run's checkpoint" "checkpoint.safetensors: exists and is not a predictions CSV of this run" -- \
  predict --checkpoint hidden_run --input hidden --output hidden_run/checkpoint.safetensors
expect_error "predict --output onto a labels CSV" "named/train.csv: exists and is not a predictions CSV of this run" -- \
  predict --checkpoint hidden_run --input hidden --output named/train.csv
expect_error "export --onnx onto the run's weights" "model.safetensors: exists and is not an ONNX model" -- \
  export --checkpoint hidden_run --onnx hidden_run/model.safetensors
cmp -s kept.safetensors hidden_run/checkpoint.safetensors && cmp -s kept_model.safetensors hidden_run/model.safetensors ||
  fail "a refused --output or --onnx changed the run's files"
if "$convoy" predict --checkpoint hidden_run --input hidden --output hidden.csv >/dev/null 2>err &&
   "$convoy" export --checkpoint hidden_run --onnx m.onnx >/dev/null 2>>err &&
   "$convoy" export --checkpoint hidden_run --onnx m.onnx >/dev/null 2>>err; then
  echo "ok   an earlier predictions CSV and an earlier ONNX export are replaced"
else
  fail "replacing an earlier predictions CSV or ONNX file: $(cat err)"
fi

finish "own-photo"
