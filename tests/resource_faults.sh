#!/usr/bin/env bash
# Resource faults: a disk that fills up (a file-size limit, and a small tmpfs
# where the system allows mounting one) while a checkpoint or a report is
# written, an output folder that cannot be written, a batch too big for the
# memory. Each: one line on stderr naming the thing, exit 2, and the outputs
# written before intact.
#   tests/resource_faults.sh path/to/convoy
set -u
convoy="$1"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/small_data.sh"
tmp=$(mktemp -d)
mounted=""
trap '[[ -n "$mounted" ]] && umount "$mounted"; rm -rf "$tmp"' EXIT
make_small_fashion "$tmp/data" 1024 256
args=(train --data "$tmp/data" --batch-size 32 --threads 1 --seed 4 --progress quiet)
failures=0

# check NAME RC STDERR_FILE NEEDLE: exit 2 and one stderr line containing NEEDLE.
check() {
  local name="$1" rc="$2" err="$3" needle="$4" lines
  lines=$(wc -l <"$err")
  if [[ $rc -ne 2 || $lines -ne 1 ]] || ! grep -qF -- "$needle" "$err"; then
    echo "FAIL $name: rc=$rc, $lines stderr lines, wanted one naming '$needle':"
    cat "$err"
    failures=$((failures + 1))
    return 1
  fi
  echo "ok   $name: $(cat "$err")"
}
same() {  # same NAME FILE COPY: the earlier output is untouched
  cmp -s "$2" "$3" && return 0
  echo "FAIL $1: $(basename "$2") changed"
  failures=$((failures + 1))
  return 1
}

# A run of 2 epochs stopped after the first: its checkpoint is the earlier output.
"$convoy" "${args[@]}" --epochs 2 --out "$tmp/run" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 6000); do [[ -e "$tmp/run/best.safetensors" ]] && break; sleep 0.01; done
kill -TERM "$pid"; wait "$pid"
cp "$tmp/run/checkpoint.safetensors" "$tmp/checkpoint.before"

# Disk full while writing a checkpoint: a 100 KiB file-size limit (the
# checkpoint is ~180 KiB); write() fails with EFBIG, convoy ignores SIGXFSZ.
(ulimit -f 100; exec "$convoy" train --resume "$tmp/run" --progress quiet) >/dev/null 2>"$tmp/err"
check "file-size limit during a checkpoint" $? "$tmp/err" "checkpoint.safetensors: cannot write" &&
  same "file-size limit during a checkpoint" "$tmp/run/checkpoint.safetensors" "$tmp/checkpoint.before" &&
  { [[ -z $(find "$tmp/run" -name '*.convoy-tmp.*') ]] || { echo "FAIL: temporary files left"; failures=$((failures + 1)); }; }

# The run then completes. A run whose reports were not all written (here:
# summary.json taken away) writes them on --resume; under a 60 KiB limit
# (model.safetensors is ~90 KiB) that fails, and the outputs stay as they were.
"$convoy" train --resume "$tmp/run" --progress quiet >/dev/null 2>&1 || { echo "FAIL: resume after the fault"; failures=$((failures + 1)); }
cp "$tmp/run/model.safetensors" "$tmp/model.before"
rm "$tmp/run/summary.json"
(ulimit -f 60; exec "$convoy" train --resume "$tmp/run" --progress quiet) >/dev/null 2>"$tmp/err"
check "file-size limit during a report" $? "$tmp/err" "model.safetensors: cannot write" &&
  same "file-size limit during a report" "$tmp/run/model.safetensors" "$tmp/model.before" &&
  { [[ ! -e $tmp/run/summary.json ]] || { echo "FAIL: a summary.json was written after the fault"; failures=$((failures + 1)); }; }
"$convoy" train --resume "$tmp/run" --progress quiet >/dev/null 2>&1 && [[ -s $tmp/run/summary.json ]] ||
  { echo "FAIL: --resume did not write the missing reports"; failures=$((failures + 1)); }

# A real full disk, where a small tmpfs can be mounted (root, outside most CI
# sandboxes): ENOSPC in the middle of the run's checkpoints.
mkdir -p "$tmp/disk"
if mount -t tmpfs -o size=600k tmpfs "$tmp/disk" 2>/dev/null; then
  mounted="$tmp/disk"
  "$convoy" "${args[@]}" --epochs 3 --checkpoint-every-steps 2 --out "$tmp/disk/run" >/dev/null 2>"$tmp/err"
  check "full disk (tmpfs)" $? "$tmp/err" "No space left on device" &&
    { "$convoy" evaluate --checkpoint "$tmp/disk/run" >/dev/null 2>"$tmp/err.eval" ||
      { echo "FAIL full disk: the checkpoint left behind does not load: $(cat "$tmp/err.eval")"; failures=$((failures + 1)); }; }
else
  echo "skip full disk (tmpfs): cannot mount here; the file-size limit cases stand in for it"
fi

# shards and demo-data on a full disk (a file-size limit): no half-written
# output, no folder they made, and a user's file beside them untouched (the
# folder and demo-data's marker stayed behind).
"$convoy" demo-data plant --out "$tmp/plant" --train 24 --test 4 --size 40x32 >/dev/null 2>&1 ||
  { echo "FAIL: demo-data for the shards case"; failures=$((failures + 1)); }
(ulimit -f 8; exec "$convoy" shards --csv "$tmp/plant/train.csv" --out "$tmp/shards" --shard-mb 0.01) >/dev/null 2>"$tmp/err"
check "shards onto a full disk" $? "$tmp/err" "File too large" &&
  { [[ ! -e $tmp/shards ]] || { echo "FAIL shards onto a full disk: left $(ls -A "$tmp/shards")"; failures=$((failures + 1)); }; }
mkdir -p "$tmp/mine" && echo notes >"$tmp/mine/notes.txt"
(ulimit -f 8; exec "$convoy" shards --csv "$tmp/plant/train.csv" --out "$tmp/mine" --shard-mb 0.01) >/dev/null 2>"$tmp/err"
check "shards onto a full disk, beside a user's file" $? "$tmp/err" "File too large" &&
  { [[ "$(ls -A "$tmp/mine")" == notes.txt ]] || { echo "FAIL shards beside a user's file: left $(ls -A "$tmp/mine")"; failures=$((failures + 1)); }; }
(ulimit -f 8; exec "$convoy" demo-data plant --out "$tmp/demo" --train 8 --test 2 --size 600x600) >/dev/null 2>"$tmp/err"
check "demo-data onto a full disk" $? "$tmp/err" "cannot write" &&
  { [[ ! -e $tmp/demo ]] || { echo "FAIL demo-data onto a full disk: left $(ls -A "$tmp/demo")"; failures=$((failures + 1)); }; }

# An output folder that cannot be created: a file is in the way.
touch "$tmp/not-a-folder"
"$convoy" "${args[@]}" --epochs 1 --out "$tmp/not-a-folder/run" >/dev/null 2>"$tmp/err"
check "output folder blocked by a file" $? "$tmp/err" "not-a-folder/run"

# A batch too big for the memory: refused before allocating, by the memory
# estimate (an address-space limit stands in for a small machine; sanitizer
# builds reserve terabytes of address space, so they skip this case).
if grep -qa -e __asan_init -e __tsan_init "$convoy"; then
  echo "skip batch too big for memory: sanitizer build"
else
  (ulimit -v 3000000; exec "$convoy" train --batch-size 60000 --epochs 1 --threads 1 --progress quiet) >/dev/null 2>"$tmp/err"
  check "batch too big for memory" $? "$tmp/err" "batch size 60000 needs"
  # A model whose weights alone do not fit (2.4e8 parameters: 3.5 GiB with
  # their gradients and sgd's state) is named by its layer, even at batch 1;
  # it said "out of memory; use a smaller --batch-size" after allocating.
  printf 'model:\n  layers: [flatten, {type: dense, units: 300000}, {type: dense, units: 10}]\n' >"$tmp/wide.yaml"
  (ulimit -v 3000000; exec "$convoy" "${args[@]}" --config "$tmp/wide.yaml" --epochs 1) >/dev/null 2>"$tmp/err"
  check "model too big for memory" $? "$tmp/err" "the most is dense_0 ("
fi

echo "$failures failed"
[[ $failures -eq 0 ]]
