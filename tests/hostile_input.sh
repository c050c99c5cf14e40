#!/usr/bin/env bash
# Hostile input (issue 18; docs/reliability.md, "Hostile input"): files built
# here as an attacker or a careless user would write them. Each run must exit
# 2 with one stderr line under 300 characters, within a capped address space,
# and leave its output folder as it found it (absent stays absent; a folder
# that held a user's file holds just that file).
set -u
convoy="$1"
here="$(cd "$(dirname "$0")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
failures=0
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

# The state of an output folder: absent, or its entries with sizes and times.
state_of() { if [[ -e "$1" ]]; then find "$1" -mindepth 1 -printf '%P %s %T@\n' | sort; else echo absent; fi; }

# AddressSanitizer reserves terabytes of shadow memory, so a sanitizer build
# runs without the cap (the release build checks it).
address_space_kib=1572864
if nm "$convoy" 2>/dev/null | grep -qE ' (__asan_init|__tsan_init)$'; then address_space_kib=unlimited; fi

# refused NAME NEEDLE OUT -- ARGS...: exit 2, one line holding NEEDLE, under
# 300 characters, in at most 1.5 GiB of address space, OUT untouched.
refused() {
  local name="$1" needle="$2" out="$3"
  shift 4
  local before rc lines chars
  before=$(state_of "$out")
  (ulimit -v "$address_space_kib"; timeout -s KILL 120 "$convoy" "$@" >out.txt 2>err.txt)  # a hang fails too
  rc=$?
  lines=$(wc -l <err.txt)
  chars=$(head -1 err.txt | wc -c)
  if [[ $rc -ne 2 || $lines -ne 1 || $chars -ge 300 ]] || ! grep -qF -- "$needle" err.txt; then
    fail "$name: rc=$rc, $lines stderr lines, $chars characters, wanted one naming '$needle':"
    head -c 600 err.txt
    echo
  elif [[ "$(state_of "$out")" != "$before" ]]; then
    fail "$name: the output folder $out changed:"
    diff <(echo "$before") <(state_of "$out")
  else
    echo "ok   $name: $(cat err.txt)"
  fi
  if grep -q "secret-content" err.txt out.txt; then fail "$name: a message shows a file's content"; fi
}

"$convoy" demo-data plant --out plant --train 24 --test 4 --size 40x32 --seed 5 >/dev/null || fail "demo-data"
echo "root:secret-content" >secret.jpg
cfg() {  # cfg FILE DATA_DIR [extra YAML lines]
  local file="$1" dir="$2"
  shift 2
  {
    printf 'data: {dir: %s, kind: csv, test_csv: test.csv, width: 16, height: 16}\n' "$dir"
    printf 'model: {name: plant_cnn}\nloss: {name: categorical_crossentropy, from_logits: true}\n'
    printf 'training: {epochs: 1, batch_size: 4, threads: 1}\noutput: {progress: quiet}\n'
    for line in "$@"; do printf '%s\n' "$line"; done
  } >"$file"
}
copy_of() { rm -rf "$1"; cp -r plant "$1"; }
mkdir -p users_folder && echo "my notes" >users_folder/notes.txt

# 1. Paths escape the image root: '..', absolute, a link leading out; in
#    train.csv, in test.csv and in convoy shards. Skip lists the row.
copy_of dots && sed -i "2s|^Train_[0-9]*|../../secret|" dots/train.csv
copy_of absolute && sed -i "2s|^Train_[0-9]*|$tmp/secret|" absolute/train.csv
copy_of linked && ln -sf "$tmp/secret.jpg" linked/images/Train_0.jpg
copy_of test_dots && sed -i "2s|^Test_[0-9]*|../../secret|" test_dots/test.csv
for d in dots absolute linked test_dots; do cfg "$d.yaml" "$tmp/$d"; done
refused "id with ../ (train.csv)" "leads outside the image folder" o1 -- train --config dots.yaml --out o1
refused "absolute id (train.csv)" "it is an absolute path" o2 -- train --config absolute.yaml --out o2
refused "link leading out (train.csv)" "symbolic link" users_folder -- train --config linked.yaml --out users_folder
refused "id with ../ (test.csv)" "test.csv: line 2" o3 -- train --config test_dots.yaml --out o3
refused "id with ../ (shards)" "leads outside the image folder" shards1 -- shards --csv dots/train.csv --out shards1
"$convoy" shards --csv dots/train.csv --out shards2 --on-bad-example skip >out.txt 2>err.txt
if [[ $? -ne 0 ]] || ! grep -q "skipped 1 bad row: line 2: image_id '../../secret' leads outside" err.txt; then
  fail "shards under skip: the row is not listed"; cat err.txt
elif grep -rq "secret-content" shards2; then
  fail "shards under skip: the secret was copied into a shard"
else
  echo "ok   shards under skip lists the row: $(cat err.txt)"
fi

# A data set's own CSV linked out of it (train.csv or test.csv to /etc/passwd):
# refused before a byte is read (an error echoed the foreign file's header).
copy_of csv_out && ln -sf "$tmp/secret.jpg" csv_out/test.csv
cfg csv_out.yaml "$tmp/csv_out"
refused "test.csv linked out of the data set" "data.test_csv test.csv: leads outside the data folder" o33 -- \
  train --config csv_out.yaml --out o33
copy_of train_out && ln -sf "$tmp/secret.jpg" train_out/train.csv
refused "train.csv linked out (found by --data)" "data.train_csv train.csv: leads outside the data folder" o34 -- \
  train --data train_out --out o34
# data.files' glob matches by the same rule: a shard linked out of data.dir (it was read).
"$convoy" shards --csv plant/train.csv --out shards_elsewhere >/dev/null || fail "shards for the glob case"
mkdir -p tf_out && ln -sf "$tmp/shards_elsewhere/train-00000-of-00001.tfrecord" tf_out/
printf 'data: {dir: tf_out, kind: tfrecord, files: "*.tfrecord", width: 16, height: 16}\nmodel: {name: plant_cnn}\n' >tf_out.yaml
printf 'loss: {name: categorical_crossentropy, from_logits: true}\ntraining: {epochs: 1, batch_size: 4}\n' >>tf_out.yaml
refused "a data.files match linked out of the data set" "data.files (*.tfrecord) matches train-00000-of-00001.tfrecord: leads outside" \
  o35 -- train --config tf_out.yaml --out o35

# 2. Unbounded nesting: a safetensors header and a JSON config 100,000 deep.
deep=$(printf '%*s' 100000 '' | tr ' ' '[')
mkdir -p nested_ckpt
python3 - "$deep" <<'PY'
import json, struct, sys
header = '{"w": {"dtype": "F32", "data_offsets": [0, 4], "shape": ' + sys.argv[1] + '}}'
open("nested_ckpt/checkpoint.safetensors", "wb").write(struct.pack("<Q", len(header)) + header.encode() + b"\0" * 4)
PY
printf '{"training": {"epochs": %s}}' "$deep" >deep.json
refused "safetensors header nested 100,000 deep" "nested deeper than 64 levels" nested_ckpt -- evaluate --checkpoint nested_ckpt
refused "JSON config nested 100,000 deep" "nested deeper than 64 levels" o4 -- train --config deep.json --out o4

# 3. A YAML alias bomb (under 1 KB, 10^9 values expanded).
{
  echo 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]'
  for i in 1 2 3 4 5 6 7 8 9; do
    p=$((i - 1))
    echo "a$i: &a$i [*a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p]"
  done
} >bomb.yaml
refused "YAML alias bomb" "expands to more than 100000 values" o5 -- train --config bomb.yaml --out o5

# 4. Sizes: a 2 GiB .jpg (sparse), a 10 MB CSV field, a line of 10 MB of commas.
copy_of big && truncate -s 2G big/images/Train_3.jpg
cfg big.yaml "$tmp/big"
refused "2 GiB image" "more than the 67108864 an image may have" o6 -- train --config big.yaml --out o6
copy_of field && python3 -c "
import sys; rows = open('field/train.csv').read().split('\n'); cells = rows[1].split(',')
cells[1] = 'v' * 10_000_000; rows[1] = ','.join(cells); open('field/train.csv', 'w').write('\n'.join(rows))"
cfg field.yaml "$tmp/field"
refused "10 MB CSV field" "(10000000 bytes)" o7 -- train --config field.yaml --out o7
copy_of commas && python3 -c "
rows = open('commas/train.csv').read().split('\n'); rows.insert(2, ',' * 10_000_000)
open('commas/train.csv', 'w').write('\n'.join(rows))"
cfg commas.yaml "$tmp/commas"
refused "10 MB line of commas" "more than 65536 fields" o8 -- train --config commas.yaml --out o8

# 5. The model does not meet the data.
cfg seed.yaml "$tmp/plant" && sed -i 's/plant_cnn/seed_cnn/' seed.yaml
refused "seed CNN on colour photos" "takes [1, 28, 28] inputs" o9 -- train --config seed.yaml --out o9
cfg nll.yaml "$tmp/plant" && sed -i 's/from_logits: true/from_logits: false/' nll.yaml
refused "nll on logits" "ends in logits" o10 -- train --config nll.yaml --out o10
mkdir -p idx8
python3 - <<'PY'
import gzip, struct
def idx(path, dims, body):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, 8, len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + body)
for name, n in (("train", 64), ("t10k", 16)):
    idx(f"idx8/{name}-images-idx3-ubyte.gz", (n, 8, 8), bytes(range(64)) * n)
    idx(f"idx8/{name}-labels-idx1-ubyte.gz", (n,), bytes(i % 10 for i in range(n)))
PY
refused "8x8 IDX on the 28x28 seed CNN" "takes [1, 28, 28] inputs but the data's examples are [1, 8, 8]" o11 -- \
  train --data idx8 --out o11 --epochs 1 --batch-size 8

# 5b. Labels a careless user writes (each used to fail late, deep in the
#     pipeline as "map: element N", or with advice that named nothing).
copy_of two_labels && sed -i '3s/^\(Train_[0-9]*\),.*/\1,1,0,1,0/' two_labels/train.csv
cfg two_labels.yaml "$tmp/two_labels"
refused "a row giving two classes" "train.csv: line 3: 2 classes set (healthy, rust)" o27 -- train --config two_labels.yaml --out o27
cfg classes_short.yaml "$tmp/plant" && sed -i '1s/^data: {/data: {classes: [healthy, rust, scab], /' classes_short.yaml
refused "a CSV class column not in data.classes" "class column 'multiple_diseases' is not in data.classes" o28 -- \
  train --config classes_short.yaml --out o28
mkdir -p class_names/ok class_names/$'tab\there' && cp plant/images/Train_0.jpg class_names/ok/ &&
  cp plant/images/Train_1.jpg class_names/$'tab\there'/
refused "a class folder named with a tab" "class name 'tab\there' holds control bytes" o29 -- \
  train --data class_names --out o29 --epochs 1
copy_of quoted && sed -i '1s/,rust,/,"""",/' quoted/train.csv
cfg quoted.yaml "$tmp/quoted"
refused "a CSV class column of quotes only" "class name '\"' is only quotes" o30 -- train --config quoted.yaml --out o30
cfg split.yaml "$tmp/plant"
refused "a split leaving a class no training image" "0.99 puts all" o31 -- train --config split.yaml --out o31 --set data.validation_split=0.99
refused "a split leaving no validation image" "leaves no validation images: even the largest class" o32 -- \
  train --config split.yaml --out o32 --set data.validation_split=0.01

# 6. Configs taken too loosely.
refused "a folder as --config" "is a folder, not a config file" o12 -- train --config plant --out o12
printf 'training:\n  epochs: 1\n  epochs: 50\n' >twice.yaml
printf '{"training": {"epochs": 1, "epochs": 50}}' >twice.json
refused "a YAML key twice" "the key 'epochs' appears twice" o13 -- train --config twice.yaml --out o13
refused "a JSON key twice" "the key 'epochs' appears twice" o14 -- train --config twice.json --out o14
refused "--seed -1" "--seed" o15 -- train --seed -1 --out o15

# 7. A user's file named like a temporary survives a run in its folder.
mkdir -p keep && echo "thesis" >keep/thesis.tmp.4000000 && echo "x" >keep/model.safetensors.tmp.4000001
cfg ok.yaml "$tmp/plant"
"$convoy" train --config ok.yaml --out keep >/dev/null 2>err.txt || { fail "a plain run"; cat err.txt; }
[[ -f keep/thesis.tmp.4000000 && -f keep/model.safetensors.tmp.4000001 ]] || fail "a user's *.tmp.<pid> file was deleted"
[[ -e keep/.convoy-lock ]] && fail "the lock file outlived its run"

# 7b. A new run into a folder holding an earlier run's outputs (or a user's
#     files of those names) replaces them only with --overwrite.
mkdir -p mine && echo "my weights" >mine/model.safetensors && echo "notes" >mine/notes.txt
refused "a new run over a user's model.safetensors" "holds an earlier run's outputs (model.safetensors)" mine -- \
  train --config ok.yaml --out mine
refused "a new run over an earlier run" "continue it with --resume keep, pass --overwrite" keep -- \
  train --config ok.yaml --out keep
"$convoy" train --config ok.yaml --out mine --overwrite >/dev/null 2>err.txt || { fail "--overwrite: $(cat err.txt)"; }
[[ "$(cat mine/notes.txt)" == notes ]] && ! grep -q "my weights" mine/model.safetensors ||
  fail "--overwrite: model.safetensors not replaced, or notes.txt touched"
refused "--overwrite with --resume" "pass no other training flags" keep -- train --resume keep --overwrite

# 8. A corrupt test image fails before the first step; nothing is left.
copy_of corrupt_test && head -c 200 plant/images/Test_1.jpg >corrupt_test/images/Test_1.jpg
cfg corrupt_test.yaml "$tmp/corrupt_test"
refused "corrupt test image, folder absent" "Test_1.jpg" o16 -- train --config corrupt_test.yaml --out o16
refused "corrupt test image, user's folder" "Test_1.jpg" users_folder -- train --config corrupt_test.yaml --out users_folder
[[ -z $(find o16 users_folder -name 'checkpoint*' 2>/dev/null) ]] || fail "checkpoints left behind"

# 9. A blow-up (Adam at lr 1e30 keeps values finite): stopped as divergence,
#    under either on_nan policy; a run with a NaN test loss resumes.
cfg adam.yaml "$tmp/plant" "optimizer: {name: adam, lr: 1e30}"
refused "divergence (on_nan: stop)" "training diverged at epoch 1" o17 -- train --config adam.yaml --out o17
refused "divergence (on_nan: skip_step)" "training diverged at epoch 1" o18 -- \
  train --config adam.yaml --out o18 --on-nan skip_step

# 10. Two runs, one folder: the second names the holder; a stale lock is taken over.
CONVOY_TEST_STEP_DELAY_MS=200 "$convoy" train --config ok.yaml --out shared --epochs 3 >/dev/null 2>first.txt &
first=$!
for _ in $(seq 300); do [[ -s shared/.convoy-lock ]] && break; sleep 0.05; done
before=$(state_of shared)
"$convoy" train --config ok.yaml --out shared >/dev/null 2>err.txt
rc=$?
if [[ $rc -ne 2 ]] || ! grep -q "another run is writing to this folder (convoy pid $first on" err.txt; then
  fail "second run on one folder: rc=$rc: $(cat err.txt)"
else
  echo "ok   second run on one folder: $(cat err.txt)"
fi
wait $first || { fail "the first run failed"; cat first.txt; }
echo "convoy pid 999999 on elsewhere, started long ago" >shared/.convoy-lock  # a dead holder's
"$convoy" train --config ok.yaml --out shared --overwrite >/dev/null 2>err.txt || { fail "a stale lock was not taken over"; cat err.txt; }
refused "--resume with --threads" "--threads" shared -- train --resume shared --threads 2
# (the run in shared/ finished its epoch: --epochs 2 continues it)
"$convoy" train --resume shared --progress lines --epochs 2 >out.txt 2>err.txt || { fail "--resume --progress lines"; cat err.txt; }
grep -q "resuming after epoch 1" out.txt || { fail "--resume --progress lines printed no progress"; cat out.txt; }

# 11. Files that are not what their names say, and folders that lead out.
copy_of fifo_test && rm fifo_test/images/Test_1.jpg && mkfifo fifo_test/images/Test_1.jpg
cfg fifo_test.yaml "$tmp/fifo_test"
refused "a FIFO named like a test image (its open waited forever)" "Test_1.jpg: not a regular file" o19 -- \
  train --config fifo_test.yaml --out o19
refused "/dev/zero as --config (read until out of memory)" "/dev/zero: not a regular file (a device or socket)" o20 -- \
  train --config /dev/zero --out o20
copy_of bomb && python3 - "$here/fixtures/images/progressive.jpg" bomb/images/Train_3.jpg <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"\xff\xc2")
b[i + 5:i + 9] = b"\xea\x60\xea\x60"  # a progressive JPEG claiming 60000 x 60000
open(sys.argv[2], "wb").write(bytes(b))
PY
cfg bomb.yaml "$tmp/bomb"
refused "progressive JPEG claiming 60000x60000 (read at 1/8)" "the JPEG header claims 60000x60000 pixels" o21 -- \
  train --config bomb.yaml --out o21
mkdir -p classes/cat classes/dog
cp plant/images/Train_{0,1,2,3}.jpg classes/cat/ && cp plant/images/Train_{4,5,6,7}.jpg classes/dog/
ln -s / classes/everything
refused "a class folder linked to / (walked the whole disk)" "class folder 'everything' leads outside" o22 -- \
  train --data classes --out o22 --epochs 1
rm classes/everything
refused "--out inside the class folders" "inside the data folder" classes -- \
  train --data classes --out classes/cat/run --epochs 1
refused "--out the data folder itself" "inside the data folder" classes -- train --data classes --out classes --epochs 1

# 12. Paths that are no plain files, and standard streams.
# A config through a pipe (/dev/fd/N, no extension) is read by its content
# (YAML here: it was read as JSON); its relative paths are the working folder's.
sed "s|$tmp/plant|plant|" ok.yaml >relative.yaml
if "$convoy" train --config <(cat relative.yaml) --out piped >out.txt 2>err.txt && [[ -f piped/model.safetensors ]]; then
  echo "ok   YAML config through a pipe, relative data.dir"
else
  fail "YAML config through a pipe: $(cat err.txt)"
fi
refused "a piped YAML config's error names the key" "training.epochs (--epochs) must be at least 1" o23 -- \
  train --config <(printf 'training:\n  epochs: 0\n') --out o23
# predict --output -: the CSV alone on stdout, the rest on stderr, no file named '-'.
"$convoy" predict --checkpoint keep --input plant/images --output predicted.csv >/dev/null 2>err.txt ||
  fail "predict to a file: $(cat err.txt)"
"$convoy" predict --checkpoint keep --input plant/images --output - --top-k 2 >stdout.csv 2>err.txt
rc=$?
if [[ $rc -ne 0 ]] || ! cmp -s stdout.csv predicted.csv || [[ -e - ]] || ! grep -q "wrote to standard output" err.txt; then
  fail "predict --output -: rc=$rc, stdout differs from the file's CSV or '-' was written: $(head -c 300 err.txt)"
else
  echo "ok   predict --output -: $(wc -l <stdout.csv) CSV lines on stdout, the rest on stderr"
fi
if [[ -w /dev/full ]]; then
  "$convoy" predict --checkpoint keep --input plant/images --output - >/dev/full 2>err.txt
  rc=$?
  if [[ $rc -ne 2 || $(wc -l <err.txt) -ne 1 ]] || ! grep -q "cannot write the predictions to standard output" err.txt; then
    fail "predict --output - onto a full stdout: rc=$rc: $(cat err.txt)"
  else
    echo "ok   predict --output - onto a full stdout: $(cat err.txt)"
  fi
fi
# predict may write its CSV into the folder it reads (decided: allowed, as
# Keras and PyTorch scripts write where told): the folder's reader takes
# images only, so a second run reads the same images and replaces the CSV
# with the same rows.
mkdir -p into_input && cp plant/images/Test_*.jpg into_input/
"$convoy" predict --checkpoint keep --input into_input --output into_input/predictions.csv >/dev/null 2>err.txt &&
  cp into_input/predictions.csv first_into.csv &&
  "$convoy" predict --checkpoint keep --input into_input --output into_input/predictions.csv >/dev/null 2>>err.txt
rc=$?
if [[ $rc -ne 0 ]] || ! cmp -s first_into.csv into_input/predictions.csv ||
  [[ $(($(wc -l <first_into.csv) - 1)) -ne $(ls into_input/*.jpg | wc -l) ]]; then
  fail "predict into its input folder, twice: rc=$rc, the rows changed or counted the CSV: $(cat err.txt)"
else
  echo "ok   predict into its input folder, twice: the same $(($(wc -l <first_into.csv) - 1)) rows"
fi
# File names with a comma, a quote or a line break are quoted in the CSV
# (RFC 4180): Python's csv reads each row back whole (a comma split it).
mkdir -p odd_names && cp plant/images/Test_0.jpg 'odd_names/a,"b".jpg' && cp plant/images/Test_1.jpg odd_names/$'two\nlines.jpg'
"$convoy" predict --checkpoint keep --input odd_names --output odd.csv >/dev/null 2>err.txt || fail "predict odd names: $(cat err.txt)"
python3 - odd.csv <<'PY' && echo "ok   odd file names quoted in predictions.csv" || fail "odd file names: the CSV does not read back"
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
names = sorted(r[0].rsplit("/", 1)[-1] for r in rows[1:])
assert names == ['a,"b".jpg', "two\nlines.jpg"], names
assert all(len(r) == len(rows[0]) for r in rows), rows
PY
# An output whose name is a FIFO, a link or a device node is not replaced
# (the rename replaced them: as root, --output /dev/null replaced the device).
mkdir -p specials && mkfifo specials/fifo.csv && ln -s loop.onnx specials/loop.onnx && ln -s /etc/hostname specials/link.csv
refused "predict --output onto a FIFO" "is a pipe (FIFO), not a file convoy may replace" specials -- \
  predict --checkpoint keep --input plant/images --output specials/fifo.csv
refused "predict --output onto a link" "is a symbolic link, not a file convoy may replace" specials -- \
  predict --checkpoint keep --input plant/images --output specials/link.csv
refused "export --onnx onto a link loop" "is a symbolic link" specials -- \
  export --checkpoint keep --onnx specials/loop.onnx
if [[ $(id -u) -eq 0 ]] && mknod specials/null c 1 3 2>/dev/null; then
  refused "export --onnx onto a device node" "is a device or socket" specials -- export --checkpoint keep --onnx specials/null
  [[ -c specials/null ]] || fail "the device node was replaced"
else
  echo "skip export --onnx onto a device node (mknod needs root)"
fi
# An --input that is there but no file is named as what it is (it said "no such file").
refused "predict --input a FIFO" "--input specials/fifo.csv: is a pipe (FIFO), not a file" specials -- \
  predict --checkpoint keep --input specials/fifo.csv --output o26/p.csv
refused "predict --input /dev/zero" "--input /dev/zero: is a device or socket, not a file" o26 -- \
  predict --checkpoint keep --input /dev/zero --output o26/p.csv
# The data set's own folder as --out: the outputs mixed with its files (the root: test_hostile_input_files).
refused "--out the data folder" "is the data folder" plant -- train --config ok.yaml --out plant/.
# A checkpoint folder that is a link loop was an internal error (exit 1).
ln -s loop_b loop_a && ln -s loop_a loop_b
for cmd in "evaluate --checkpoint loop_a" "predict --checkpoint loop_a" "export --checkpoint loop_a --onnx m.onnx" \
  "train --resume loop_a"; do
  # shellcheck disable=SC2086
  refused "$cmd" "loop_a: cannot be read (Too many levels of symbolic links)" o24 -- $cmd
done
# Unreadable files: root reads them anyway, so the check needs another user.
chmod 000 ok.yaml
if [[ -r ok.yaml ]]; then
  echo "skip unreadable --config (running as root: chmod 000 does not stop root reading)"
else
  refused "unreadable --config" "ok.yaml: cannot open the run config (Permission denied)" o25 -- train --config ok.yaml --out o25
fi
chmod 644 ok.yaml

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all hostile inputs refused"
