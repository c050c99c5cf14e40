#!/usr/bin/env bash
# Graceful stop: SIGTERM or SIGINT during training finishes the step, writes a
# checkpoint and exits 143 / 130 with one line saying how to resume; the
# resumed run ends bit-identical to an uninterrupted one. A second SIGINT
# exits at once, leaving the earlier checkpoint as it was.
#   tests/graceful_stop.sh path/to/convoy
set -u
convoy="$1"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/small_data.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make_small_fashion "$tmp/data" 2048 256
args=(train --data "$tmp/data" --epochs 3 --batch-size 32 --threads 1 --seed 3 --progress lines)
failures=0
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }

"$convoy" "${args[@]}" --out "$tmp/full" >"$tmp/full.log" || { echo "FAIL: the reference run failed"; exit 1; }

# check_signal_thread PID LABEL: exactly one of the training process's threads
# takes SIGINT and SIGTERM, and it is not the main thread; every other one
# (main, OpenMP's, the input pipeline's) blocks both, so no handler ever runs
# on a thread inside a kernel (oneDNN's JIT sgemm keeps its stack pointer in
# the heap: docs/reliability.md, "Graceful stop"). The main thread is always
# there, so the check holds whichever other threads exist at that moment.
check_signal_thread() {
  local pid="$1" label="$2" open=0 threads=0 main_open=0 mask
  for status in /proc/"$pid"/task/*/status; do
    mask=$(awk '/^SigBlk:/ {print $2}' "$status" 2>/dev/null) || continue
    [[ -n $mask ]] || continue
    threads=$((threads + 1))
    if (( (16#$mask & 0x4002) != 0x4002 )); then  # bits of SIGINT (2) and SIGTERM (15)
      open=$((open + 1))
      [[ $status == /proc/$pid/task/$pid/status ]] && main_open=1
    fi
  done
  if [[ $open -ne 1 || $main_open -ne 0 ]]; then
    fail "$label" "$open of $threads threads take SIGINT/SIGTERM (the main thread among them: $main_open); wanted exactly 1, not main"
  fi
}

# stop_mid_run SIGNAL EXPECTED_CODE: signal once after epoch 1, then resume.
stop_mid_run() {
  local signal="$1" want="$2" dir="$tmp/$1"
  "$convoy" "${args[@]}" --out "$dir" >"$tmp/$signal.log" 2>"$tmp/$signal.err" &
  local pid=$!
  for _ in $(seq 6000); do [[ -e "$dir/history.csv" ]] && break; sleep 0.01; done  # epoch 1 is done
  check_signal_thread "$pid" "$signal"
  kill "-$signal" "$pid"  # the run stops at its next step, early in epoch 2
  wait "$pid"
  local rc=$?
  local line
  line=$(cat "$tmp/$signal.err")
  if [[ $rc -ne $want ]]; then fail "$signal" "exit $rc, wanted $want; it said: $(head -c 4000 "$tmp/$signal.err")"; return; fi
  if [[ $(wc -l <"$tmp/$signal.err") -ne 1 ]] || ! grep -qF "convoy train --resume $dir" "$tmp/$signal.err"; then
    fail "$signal" "wanted one line saying 'convoy train --resume $dir', got: $line"; return
  fi
  [[ -e "$dir/checkpoint.safetensors" ]] || { fail "$signal" "no checkpoint written"; return; }
  [[ -e "$dir/summary.json" ]] && { fail "$signal" "a stopped run wrote summary.json"; return; }
  "$convoy" train --resume "$dir" --progress lines >"$tmp/$signal.resume.log" 2>&1 || { fail "$signal" "resume failed"; return; }
  grep -q "steps of epoch" "$tmp/$signal.resume.log" || { fail "$signal" "did not resume mid-epoch: $(head -n 1 "$tmp/$signal.resume.log")"; return; }
  cmp -s "$tmp/full/model.safetensors" "$dir/model.safetensors" || { fail "$signal" "resumed weights differ"; return; }
  echo "ok   $signal: exit $rc, '$line'; resumed bit-identically"
}
stop_mid_run TERM 143
stop_mid_run INT 130

# A second SIGINT while the first one's checkpoint is being written (each
# write held for 2 s by the test hook) exits at once, removing the write's
# temporary file; the checkpoint from before stays as it was, and the run
# still resumes bit-identically.
dir="$tmp/twice"
CONVOY_TEST_CHECKPOINT_DELAY_MS=2000 "$convoy" "${args[@]}" --out "$dir" >/dev/null 2>"$tmp/twice.err" &
pid=$!
# Epoch 1's checkpoints: the latest, then best.safetensors (also held 2 s).
for _ in $(seq 6000); do [[ -e "$dir/best.safetensors" ]] && break; sleep 0.01; done
cp "$dir/checkpoint.safetensors" "$tmp/before.safetensors"
kill -INT "$pid"
# The step ends; the stop's checkpoint write begins and is held.
inside=no
for _ in $(seq 6000); do compgen -G "$dir/checkpoint.safetensors.convoy-tmp.$pid" >/dev/null && { inside=yes; break; }; sleep 0.01; done
start=$(date +%s%N)
kill -INT "$pid"
wait "$pid"
rc=$?
waited_ms=$((($(date +%s%N) - start) / 1000000))
if [[ $rc -ne 130 || $waited_ms -gt 1000 ]]; then
  fail "second SIGINT" "exit $rc after $waited_ms ms, wanted 130 at once; it said: $(head -c 4000 "$tmp/twice.err")"
elif [[ $inside != yes ]]; then
  fail "second SIGINT" "it did not land inside the stop's checkpoint write"
elif compgen -G "$dir/*.convoy-tmp.*" >/dev/null; then
  fail "second SIGINT" "the write's temporary file was left behind: $(ls -A "$dir")"
elif ! cmp -s "$dir/checkpoint.safetensors" "$tmp/before.safetensors"; then
  fail "second SIGINT" "the earlier checkpoint changed"
elif ! "$convoy" train --resume "$dir" --progress quiet >/dev/null 2>&1 ||
     ! cmp -s "$tmp/full/model.safetensors" "$dir/model.safetensors"; then
  fail "second SIGINT" "resuming after it did not end bit-identical"
else
  echo "ok   second SIGINT: exit 130 after $waited_ms ms inside a checkpoint write, its temporary removed; earlier checkpoint intact, resumed bit-identically"
fi
echo "$failures failed"
[[ $failures -eq 0 ]]
