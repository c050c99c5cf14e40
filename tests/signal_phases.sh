#!/usr/bin/env bash
# SIGINT/SIGTERM outside a fit's steps (graceful_stop.sh covers the steps):
# before the data loads, while predict loads a run, in the last epoch's
# checkpoint write (after the last step) and while the reports are written.
# Each ends the run cleanly: exit 130 / 143 at once with one line on stderr,
# no temporary or half-written file left, and what a resume needs intact.
# Every run here is a background job of a script, which starts with SIGINT
# ignored: convoy takes it all the same.
#   tests/signal_phases.sh path/to/convoy
set -u
convoy="$1"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/small_data.sh"
tmp=$(mktemp -d)
holders=()
cleanup() {
  local p
  for p in "${holders[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
make_small_fashion "$tmp/data" 2048 256
args=(--batch-size 32 --threads 1 --seed 3 --progress lines)
failures=0
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }

# ends_within PID SECONDS: 0 once PID has exited (its status in $ended_rc).
ends_within() {
  local pid="$1" i
  for i in $(seq $(($2 * 100))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; wait "$pid"; return 1; fi
  wait "$pid"
  ended_rc=$?
}
# waits until FILE exists (at most 60 s)
await() { for _ in $(seq 6000); do [[ -e "$1" ]] && return 0; sleep 0.01; done; return 1; }
# waits until FILE holds a line matching TEXT (at most 60 s)
await_line() { for _ in $(seq 6000); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.01; done; return 1; }
no_temporaries() { ! compgen -G "$1/*.convoy-tmp.*" >/dev/null; }
# resume_writes_reports CASE DIR: a resume of the stopped run writes its reports
resume_writes_reports() {
  if ! "$convoy" train --resume "$2" --progress quiet >"$2.resume.log" 2>&1 || [[ ! -e "$2/summary.json" ]]; then
    fail "$1" "the resume did not write the reports: $(tail -n 3 "$2.resume.log")"
    return 1
  fi
}
# check CASE RC WANT ERR LINE: exit code and stderr exactly LINE
check() {
  local name="$1" rc="$2" want="$3" err="$4" line="$5"
  if [[ $rc -ne $want ]]; then fail "$name" "exit $rc, wanted $want; it said: $(head -c 2000 "$err")"; return 1; fi
  if [[ "$(cat "$err")" != "$line" ]]; then fail "$name" "wanted the one line '$line', got: $(head -c 2000 "$err")"; return 1; fi
}

"$convoy" train --data "$tmp/data" --epochs 2 "${args[@]}" --out "$tmp/full" >"$tmp/full.log" 2>&1 ||
  { echo "FAIL: the reference run failed: $(tail -n 3 "$tmp/full.log")"; exit 1; }

# --- before the data loads (held 3 s by the test hook, once the output
# folder is locked): nothing written yet, nothing to resume
for pair in TERM:143 INT:130; do
  sig=${pair%%:*} want=${pair##*:} dir="$tmp/load_$pair"
  CONVOY_TEST_LOAD_DELAY_MS=3000 "$convoy" train --data "$tmp/data" --epochs 1 "${args[@]}" --out "$dir" \
    >/dev/null 2>"$tmp/load_$sig.err" &
  pid=$!
  if ! await "$dir/.convoy-lock"; then fail "SIG$sig while loading" "the run never locked its folder"; kill -KILL "$pid"; wait "$pid"; continue; fi
  kill "-$sig" "$pid"
  if ! ends_within "$pid" 2; then fail "SIG$sig while loading" "still running 2 s after the signal"; continue; fi
  check "SIG$sig while loading" "$ended_rc" "$want" "$tmp/load_$sig.err" "convoy: stopped by SIG$sig" || continue
  no_temporaries "$dir" || { fail "SIG$sig while loading" "left temporary files: $(ls -A "$dir")"; continue; }
  echo "ok   SIG$sig while the data loads: exit $ended_rc at once, one line"
done

# --- while predict loads the run: its checkpoint is a pipe some program
# holds open without writing, so reading it waits. No output, no temporary.
mkdir -p "$tmp/held" "$tmp/pred"
cp "$tmp/full/"*.safetensors "$tmp/held/"
rm "$tmp/held/checkpoint.safetensors"
mkfifo "$tmp/held/checkpoint.safetensors"
sleep 600 <>"$tmp/held/checkpoint.safetensors" &
holders+=($!)
"$convoy" predict --checkpoint "$tmp/held" --input "$tmp/data/t10k-images-idx3-ubyte" --output "$tmp/pred/out.csv" \
  >/dev/null 2>"$tmp/predict.err" &
pid=$!
opened=no
for _ in $(seq 3000); do
  ls -l "/proc/$pid/fd" 2>/dev/null | grep -qF "$tmp/held/checkpoint.safetensors" && { opened=yes; break; }
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.01
done
if [[ $opened != yes ]]; then
  fail "SIGINT in predict" "predict never opened the checkpoint: $(head -c 500 "$tmp/predict.err")"; kill -KILL "$pid" 2>/dev/null
else
  kill -INT "$pid"
  if ! ends_within "$pid" 2; then
    fail "SIGINT in predict" "still running 2 s after the signal"
  elif check "SIGINT in predict" "$ended_rc" 130 "$tmp/predict.err" "convoy: stopped by SIGINT"; then
    if [[ -n "$(ls -A "$tmp/pred")" ]]; then
      fail "SIGINT in predict" "it left an output or temporary file: $(ls -A "$tmp/pred")"
    else
      echo "ok   SIGINT while predict loads the run: exit 130 at once, one line, no output"
    fi
  fi
fi

# --- in the last epoch's checkpoint write, after the last step: the run
# stops there (no reports) and a resume writes them, bit-identical.
dir="$tmp/last"
CONVOY_TEST_CHECKPOINT_DELAY_MS=1500 "$convoy" train --data "$tmp/data" --epochs 2 "${args[@]}" --out "$dir" \
  >"$tmp/last.log" 2>"$tmp/last.err" &
pid=$!
if ! await_line "$tmp/last.log" "^epoch *2/2" || ! await "$dir/checkpoint.safetensors.convoy-tmp.$pid"; then
  fail "SIGINT after the last step" "the last epoch's checkpoint write never began"; kill -KILL "$pid"; wait "$pid"
else
  kill -INT "$pid"
  wait "$pid"
  rc=$?
  if check "SIGINT after the last step" "$rc" 130 "$tmp/last.err" \
      "convoy: stopped by SIGINT; the checkpoint in $dir has the position; continue with: convoy train --resume $dir"; then
    if [[ -e "$dir/summary.json" ]]; then
      fail "SIGINT after the last step" "a stopped run wrote summary.json"
    elif ! resume_writes_reports "SIGINT after the last step" "$dir"; then
      :
    elif ! cmp -s "$tmp/full/model.safetensors" "$dir/model.safetensors"; then
      fail "SIGINT after the last step" "resumed weights differ"
    else
      echo "ok   SIGINT in the last epoch's checkpoint write: exit 130, the resume line; resuming wrote the reports, bit-identical"
    fi
  fi
fi

# --- while the reports are written (held 3 s after the final evaluation)
dir="$tmp/reports"
CONVOY_TEST_REPORT_DELAY_MS=3000 "$convoy" train --data "$tmp/data" --epochs 1 "${args[@]}" --out "$dir" \
  >"$tmp/reports.log" 2>"$tmp/reports.err" &
pid=$!
if ! await_line "$tmp/reports.log" "^total training time"; then
  fail "SIGTERM in the reports" "the run never reached its reports"; kill -KILL "$pid"; wait "$pid"
else
  kill -TERM "$pid"
  if ! ends_within "$pid" 2; then
    fail "SIGTERM in the reports" "still running 2 s after the signal"
  elif check "SIGTERM in the reports" "$ended_rc" 143 "$tmp/reports.err" "convoy: stopped by SIGTERM"; then
    if [[ -e "$dir/summary.json" ]] || ! no_temporaries "$dir"; then
      fail "SIGTERM in the reports" "it left summary.json or a temporary file: $(ls "$dir")"
    elif resume_writes_reports "SIGTERM in the reports" "$dir"; then
      echo "ok   SIGTERM while the reports are written: exit 143 at once, one line; resuming wrote them"
    fi
  fi
fi

# --- a crash names itself: SIGABRT (what an uncaught exception or a failed
# check raises) writes one line and the stack to stderr, then the process
# dies by it as before (exit 134)
dir="$tmp/abort"
CONVOY_TEST_LOAD_DELAY_MS=3000 "$convoy" train --data "$tmp/data" --epochs 1 "${args[@]}" --out "$dir" \
  >/dev/null 2>"$tmp/abort.err" &
pid=$!
if ! await "$dir/.convoy-lock"; then
  fail "SIGABRT" "the run never locked its folder"; kill -KILL "$pid"; wait "$pid"
else
  kill -ABRT "$pid"
  wait "$pid" 2>/dev/null
  rc=$?
  if [[ $rc -ne 134 ]]; then
    fail "SIGABRT" "exit $rc, wanted 134"
  elif ! head -n 1 "$tmp/abort.err" | grep -q "^convoy: internal error: SIGABRT" ||
       [[ $(grep -c "convoy(+0x" "$tmp/abort.err") -lt 3 ]]; then
    fail "SIGABRT" "wanted a line naming it and the stack, got: $(head -c 1000 "$tmp/abort.err")"
  else
    echo "ok   SIGABRT names itself: exit 134, one line and $(grep -c "(+0x" "$tmp/abort.err") frames"
  fi
fi

echo "$failures failed"
[[ $failures -eq 0 ]]
