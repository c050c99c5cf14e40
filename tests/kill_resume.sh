#!/usr/bin/env bash
# The crash-safety promise: a run killed with SIGKILL at 20 random instants
# (several of them inside checkpoint writes), resumed with --resume after
# each, ends with the same weights, bit for bit, and the same per-epoch
# metrics as a run never interrupted. Also: a damaged newest checkpoint is
# rejected by its checksum and the previous one is used, still bit-identical.
#   tests/kill_resume.sh path/to/convoy [SEED]
set -eu
convoy="$1"
RANDOM="${2:-20240611}"  # seeds bash's generator: the same instants every run
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/small_data.sh"
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
make_small_fashion "$tmp/data" 2048 256
# 4 epochs of 64 steps, a checkpoint every 4 steps; each write pauses 30 ms
# between its flushed temporary file and the rename, widening the window in
# which a kill lands inside a write.
args=(train --data "$tmp/data" --epochs 4 --batch-size 32 --threads 1 --seed 5 --progress lines
      --checkpoint-every-steps 4)
export CONVOY_TEST_CHECKPOINT_DELAY_MS=30

"$convoy" "${args[@]}" --out "$tmp/full" >"$tmp/full.log"
# The interrupted runs also sleep 40 ms per step: 256 steps then take at least
# 10 s on any machine, more than the 20 kill intervals can use up, so a fast
# idle machine does not finish the run before the last kill.
export CONVOY_TEST_STEP_DELAY_MS=40

run="$tmp/cut"
ckpt="$run/checkpoint.safetensors"
inode() { stat -c %i "$1" 2>/dev/null || echo none; }
start() {  # a fresh run while there is no checkpoint yet, else a resume
  if [[ -e "$ckpt" || -e "$run/checkpoint.prev.safetensors" ]]; then
    "$convoy" train --resume "$run" --progress lines >>"$tmp/cut.log" 2>>"$tmp/cut.err" &
  else
    "$convoy" "${args[@]}" --out "$run" >>"$tmp/cut.log" 2>>"$tmp/cut.err" &
  fi
  pid=$!
  pids+=("$pid")
}
fail() { echo "FAIL: $*"; tail -n 5 "$tmp/cut.err" 2>/dev/null; exit 1; }

kills=0 inside_writes=0 fresh_starts=0
while ((kills < 20)); do
  start
  before=$(inode "$ckpt")
  case $((kills % 4)) in
    0)  # inside a checkpoint write: its temporary file exists
      for _ in $(seq 6000); do
        compgen -G "$run/checkpoint.safetensors.convoy-tmp.$pid" >/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.01
      done ;;
    1)  # anywhere in start-up or the first steps
      sleep "0.$(printf %03d $((RANDOM % 1000)))" ;;
    *)  # after this process's first checkpoint, at a random point of the next interval
      for _ in $(seq 6000); do
        [[ $(inode "$ckpt") != "$before" ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.01
      done
      sleep "0.$(printf %03d $((RANDOM % 300)))" ;;
  esac
  kill -0 "$pid" 2>/dev/null || { wait "$pid" || true; fail "the run ended before kill $((kills + 1)) of 20"; }
  in_write=0
  compgen -G "$run/checkpoint.safetensors.convoy-tmp.$pid" >/dev/null && in_write=1
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  kills=$((kills + 1))
  inside_writes=$((inside_writes + in_write))
  [[ -e "$ckpt" || -e "$run/checkpoint.prev.safetensors" ]] || fresh_starts=$((fresh_starts + 1))
done
echo "killed 20 times, $inside_writes of them inside a checkpoint write ($fresh_starts before any checkpoint existed)"
((inside_writes >= 3)) || fail "only $inside_writes kills landed inside a checkpoint write"
! grep -q "warning" "$tmp/cut.err" || fail "a checkpoint was damaged by a kill: $(grep warning "$tmp/cut.err" | head -n 1)"

# Damage the newest checkpoint (one byte of its tensor data): the resume must
# reject it by its checksum, say so in one line and use the previous one.
# (Through a copy: a kill between the two renames of a rotation leaves both
# names on one file for a moment, and damage must hit only the newest.)
size=$(stat -c %s "$ckpt")
cp "$ckpt" "$tmp/damaged"
printf '\xff' | dd of="$tmp/damaged" bs=1 seek=$((size - 1000)) conv=notrunc status=none
mv "$tmp/damaged" "$ckpt"
"$convoy" train --resume "$run" --progress lines >>"$tmp/cut.log" 2>"$tmp/final.err" || fail "the final resume failed"
grep -q "checksum mismatch.*using the previous checkpoint" "$tmp/final.err" ||
  fail "no fallback warning for a damaged checkpoint: $(cat "$tmp/final.err")"

cmp "$tmp/full/model.safetensors" "$run/model.safetensors" || fail "resumed weights differ from the uninterrupted run's"
# Same per-epoch metrics too (the partial sums survive kills); times differ.
diff <(cut -d, -f1-6 "$tmp/full/history.csv") <(cut -d, -f1-6 "$run/history.csv") >/dev/null ||
  fail "history.csv differs: $(diff <(cut -d, -f1-6 "$tmp/full/history.csv") <(cut -d, -f1-6 "$run/history.csv"))"
leftovers=$(find "$run" -maxdepth 1 -name '*.convoy-tmp.*' | wc -l)
((leftovers == 0)) || fail "$leftovers temporary files left behind"
echo "1 passed, 0 failed: 20 SIGKILLs + a damaged checkpoint, resumed bit-identically"
