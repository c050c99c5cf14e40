#!/usr/bin/env bash
# Kill a run with SIGKILL after its first checkpoint, resume it, and check that
# it ends with the same weights, bit for bit, as a run never interrupted; and
# that `convoy evaluate` reproduces the reported accuracy.
set -eu
convoy="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 12,800 training images (100 steps an epoch) and 2,000 test images: the
# promise does not depend on the size, and the sanitizer builds run this too.
source "$(dirname "$0")/small_data.sh"
make_small_fashion "$tmp/data" 12800 2000
args=(train --data "$tmp/data" --epochs 3 --threads 2 --seed 5 --progress lines --device cpu)  # bit-exact resume is a CPU promise

"$convoy" "${args[@]}" --out "$tmp/full" >"$tmp/full.log"

# The run to kill sleeps 5 ms a step, so no machine finishes it before the kill.
CONVOY_TEST_STEP_DELAY_MS=5 "$convoy" "${args[@]}" --out "$tmp/cut" >"$tmp/cut.log" &
pid=$!
# However long the first epoch takes on a busy machine: until its checkpoint.
while kill -0 "$pid" 2>/dev/null && [[ ! -e "$tmp/cut/checkpoint.safetensors" ]]; do sleep 0.1; done
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
[[ -e "$tmp/cut/checkpoint.safetensors" ]] || { echo "FAIL: no checkpoint was written"; exit 1; }
echo "killed after: $(tail -n +2 "$tmp/cut/history.csv" | wc -l) epoch(s)"

"$convoy" train --resume "$tmp/cut" --progress lines >"$tmp/resume.log"
grep -q "resuming after epoch" "$tmp/resume.log" || { echo "FAIL: did not resume"; cat "$tmp/resume.log"; exit 1; }
cmp "$tmp/full/model.safetensors" "$tmp/cut/model.safetensors" || { echo "FAIL: resumed weights differ"; exit 1; }
[[ $(tail -n +2 "$tmp/cut/history.csv" | wc -l) -eq 3 ]] || { echo "FAIL: history.csv lacks epochs"; exit 1; }

# The run's report renders in a browser with every picture.
bash "$(dirname "$0")/report_renders.sh" "$tmp/cut"

reported=$(python3 -c "import json,sys; print('%.4f' % json.load(open(sys.argv[1]))['test_accuracy'])" "$tmp/cut/summary.json")
evaluated=$("$convoy" evaluate --checkpoint "$tmp/cut" | sed -E 's/.*test_accuracy ([0-9.]+).*/\1/')
[[ "$reported" == "$evaluated" ]] || { echo "FAIL: evaluate gives $evaluated, the run reported $reported"; exit 1; }

# predict: a submission CSV with a header, one row per image, probabilities summing to 1.
"$convoy" predict --checkpoint "$tmp/cut" --input /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz \
  --output "$tmp/submission.csv" >/dev/null
python3 - "$tmp/submission.csv" <<'PY' || { echo "FAIL: bad submission.csv"; exit 1; }
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
assert rows[0][0] == "id" and len(rows[0]) == 11, rows[0]
assert len(rows) == 10001, len(rows)
for r in rows[1:]:
    assert abs(sum(map(float, r[1:])) - 1) < 1e-3, r
PY
# The peers' own readers load what convoy wrote (skips cleanly without them).
TF_CPP_MIN_LOG_LEVEL=3 "${CONVOY_PEERS_PYTHON:-python3}" "$(dirname "$0")/peer_readers.py" "$tmp/cut" 2>/dev/null | grep -E "^(ok|skip)"
echo "1 passed, 0 failed: resume is bit-identical; evaluate reproduces $reported; predict writes a submission"
