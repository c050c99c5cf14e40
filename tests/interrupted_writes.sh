#!/usr/bin/env bash
# A signal that ends convoy at once (outside a fit's steps, or a second one
# inside them; or a crash) while an output is being written: the handler removes the
# write's temporary file, so no `<output>.convoy-tmp.<pid>` is left beside a
# user's files, and the output itself is absent (or, for a checkpoint, as it
# was). Each write is held open by CONVOY_TEST_WRITE_DELAY_MS (every atomic
# write) or CONVOY_TEST_CHECKPOINT_DELAY_MS (the checkpoint savers) between
# its flushed temporary file and the rename.
#   tests/interrupted_writes.sh path/to/convoy
set -u
convoy="$1"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/small_data.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make_small_fashion "$tmp/data" 512 64
args=(--batch-size 32 --threads 1 --seed 3 --progress lines)
failures=0
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
# waits until FILE exists (at most 60 s)
await() { for _ in $(seq 6000); do [[ -e "$1" ]] && return 0; sleep 0.01; done; return 1; }

"$convoy" train --data "$tmp/data" --epochs 1 "${args[@]}" --out "$tmp/run" >"$tmp/run.log" 2>&1 ||
  { echo "FAIL: the reference run failed: $(tail -n 3 "$tmp/run.log")"; exit 1; }

# interrupted CASE SIGNAL WANT_RC DIR OUTPUT -- ENV... convoy ARGS: starts it, waits for OUTPUT's
# temporary file, signals, and checks the exit status, one line, and that DIR holds neither.
interrupted() {
  local name="$1" sig="$2" want="$3" dir="$4" output="$5"
  shift 6
  mkdir -p "$dir"
  env "$@" >/dev/null 2>"$tmp/err" &
  local pid=$!
  if ! await "$output.convoy-tmp.$pid"; then
    fail "$name" "the write never began: $(head -c 500 "$tmp/err")"; kill -KILL "$pid"; wait "$pid"; return
  fi
  kill "-$sig" "$pid"
  wait "$pid" 2>/dev/null
  local rc=$?
  if [[ $rc -ne $want ]]; then fail "$name" "exit $rc, wanted $want: $(head -c 500 "$tmp/err")"; return; fi
  case "$sig" in
    ABRT | SEGV | BUS) # a crash: its report's first line, then the stack
      if ! head -n 1 "$tmp/err" | grep -q "^convoy: internal error: SIG$sig"; then
        fail "$name" "stderr: $(head -c 500 "$tmp/err")"; return
      fi ;;
    *) if [[ "$(cat "$tmp/err")" != "convoy: stopped by SIG$sig" ]]; then fail "$name" "stderr: $(head -c 500 "$tmp/err")"; return; fi ;;
  esac
  if compgen -G "$dir/*.convoy-tmp.*" >/dev/null || [[ -e "$dir/.convoy-lock" ]]; then
    fail "$name" "left a temporary file or the folder's lock: $(ls -A "$dir")"; return
  fi
  if [[ -e "$output" ]]; then fail "$name" "left $output"; return; fi
  echo "ok   $name: exit $rc, one line, no temporary, no output"
}

interrupted "SIGTERM in predict's CSV write" TERM 143 "$tmp/pred" "$tmp/pred/out.csv" -- \
  CONVOY_TEST_WRITE_DELAY_MS=5000 "$convoy" predict --checkpoint "$tmp/run" \
  --input "$tmp/data/t10k-images-idx3-ubyte" --output "$tmp/pred/out.csv"
interrupted "SIGINT in export's ONNX write" INT 130 "$tmp/onnx" "$tmp/onnx/m.onnx" -- \
  CONVOY_TEST_WRITE_DELAY_MS=5000 "$convoy" export --checkpoint "$tmp/run" --onnx "$tmp/onnx/m.onnx"
interrupted "SIGTERM in the final model write" TERM 143 "$tmp/final" "$tmp/final/model.safetensors" -- \
  CONVOY_TEST_WRITE_DELAY_MS=400 "$convoy" train --data "$tmp/data" --epochs 1 "${args[@]}" --out "$tmp/final"
interrupted "SIGINT in a report's write" INT 130 "$tmp/report" "$tmp/report/summary.json" -- \
  CONVOY_TEST_WRITE_DELAY_MS=400 "$convoy" train --data "$tmp/data" --epochs 1 "${args[@]}" --out "$tmp/report"

# A crash inside a write (here SIGABRT, what a failed check raises) reports
# itself and also removes the write's temporary.
interrupted "SIGABRT in predict's CSV write" ABRT 134 "$tmp/crash" "$tmp/crash/out.csv" -- \
  CONVOY_TEST_WRITE_DELAY_MS=5000 "$convoy" predict --checkpoint "$tmp/run" \
  --input "$tmp/data/t10k-images-idx3-ubyte" --output "$tmp/crash/out.csv"

# A second signal inside a fit's checkpoint write ends the run at once: the
# checkpoint's temporary goes, the epoch before's checkpoint stays.
dir="$tmp/second"
CONVOY_TEST_CHECKPOINT_DELAY_MS=400 "$convoy" train --data "$tmp/data" --epochs 3 "${args[@]}" --out "$dir" \
  >"$tmp/second.log" 2>"$tmp/second.err" &
pid=$!
if ! await "$dir/checkpoint.safetensors" || ! await "$dir/checkpoint.safetensors.convoy-tmp.$pid"; then
  fail "a second SIGINT in a checkpoint write" "the second checkpoint write never began"; kill -KILL "$pid"; wait "$pid"
else
  kill -INT "$pid"; sleep 0.05; kill -INT "$pid"
  wait "$pid" 2>/dev/null
  rc=$?
  if [[ $rc -ne 130 ]]; then
    fail "a second SIGINT in a checkpoint write" "exit $rc, wanted 130: $(head -c 500 "$tmp/second.err")"
  elif compgen -G "$dir/*.convoy-tmp.*" >/dev/null || [[ -e "$dir/.convoy-lock" ]]; then
    fail "a second SIGINT in a checkpoint write" "left a temporary file or its lock: $(ls -A "$dir")"
  elif ! "$convoy" train --resume "$dir" --progress quiet >"$tmp/second.resume" 2>&1; then
    fail "a second SIGINT in a checkpoint write" "the kept checkpoint does not resume: $(tail -n 2 "$tmp/second.resume")"
  else
    echo "ok   a second SIGINT inside a checkpoint write: exit 130, no temporary, no lock, the earlier checkpoint resumes"
  fi
fi

echo "$failures failed"
[[ $failures -eq 0 ]]
