#!/usr/bin/env bash
# Keras-faithful early stopping and continuing runs (issue 19):
#  - the console says "Epoch 3: early stopping" and "Restoring model weights
#    from the end of the best epoch: 1."; summary.json, the final line and
#    `convoy evaluate` all report the weights the run keeps (epoch 1's);
#  - `--resume` of a run that early stopping ended, or that trained all its
#    epochs, says it is finished and changes nothing;
#  - `--resume DIR --epochs 4` after a 2-epoch run gives the same bits as a
#    run that asked for 4 epochs from the start.
#   tests/early_stopping.sh build/convoy
set -u  # no pipefail: small_data.sh cuts zcat short on purpose
convoy="$1"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/small_data.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
make_small_fashion "$tmp/data" 2560 512
common=(--data "$tmp/data" --threads 1 --progress lines --seed 3)

# min_delta 1.0 on an accuracy: only the first epoch improves, so patience 2 stops after epoch 3.
cat >"$tmp/es.yaml" <<'YAML'
training: {epochs: 8}
callbacks:
  early_stopping: {monitor: val_accuracy, patience: 2, min_delta: 1.0, restore_best_weights: true}
YAML
"$convoy" train --config "$tmp/es.yaml" "${common[@]}" --out "$tmp/es" >"$tmp/es.log" 2>&1 || { cat "$tmp/es.log"; fail "early-stopping run"; }
grep -qx "Epoch 3: early stopping" "$tmp/es.log" || { cat "$tmp/es.log"; fail "no 'Epoch 3: early stopping'"; }
grep -qx "Restoring model weights from the end of the best epoch: 1." "$tmp/es.log" || fail "no restore line"
grep -q "(weights of epoch 1)" "$tmp/es.log" || fail "the final line does not say which epoch's weights it reports"
python3 - "$tmp/es/summary.json" <<'PY' || fail "summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["stopped_epoch"] == 3 and s["weights_epoch"] == 1, (s.get("stopped_epoch"), s.get("weights_epoch"))
assert s["test_accuracy"] == s["history"][0]["test_accuracy"], (s["test_accuracy"], s["history"][0])
assert abs(s["evaluation"]["accuracy"] - s["test_accuracy"]) < 1e-9, (s["evaluation"]["accuracy"], s["test_accuracy"])
PY
reported=$(python3 -c "import json,sys; print('%.4f' % json.load(open(sys.argv[1]))['test_accuracy'])" "$tmp/es/summary.json")
evaluated=$("$convoy" evaluate --checkpoint "$tmp/es" | sed -E 's/.*test_accuracy ([0-9.]+).*/\1/')
[[ $evaluated == "$reported" ]] || fail "convoy evaluate says $evaluated, the summary $reported"
before=$(cd "$tmp/es" && find . -type f -exec sha256sum {} + | sort)
"$convoy" train --resume "$tmp/es" >"$tmp/again.log" 2>&1 || { cat "$tmp/again.log"; fail "--resume of a finished run exited non-zero"; }
grep -q "is finished: early stopping ended it after epoch 3" "$tmp/again.log" || { cat "$tmp/again.log"; fail "--resume did not say the run is finished"; }
[[ $(cd "$tmp/es" && find . -type f -exec sha256sum {} + | sort) == "$before" ]] || fail "--resume of a finished run changed its folder"
echo "ok: early stopping said so, reported epoch 1's weights everywhere, and --resume said the run is finished"

# Continuing a finished run to more epochs equals asking for them at the start.
"$convoy" train "${common[@]}" --epochs 2 --out "$tmp/short" >/dev/null 2>&1 || fail "2-epoch run"
"$convoy" train --resume "$tmp/short" >"$tmp/done.log" 2>&1 || fail "--resume of a completed run exited non-zero"
grep -q "is finished: it trained all 2 epochs" "$tmp/done.log" || { cat "$tmp/done.log"; fail "no 'finished' line"; }
# The same --epochs N again (a retry wrapper) is "finished", exit 0; fewer is refused, exit 2.
"$convoy" train --resume "$tmp/short" --epochs 2 >"$tmp/same.log" 2>&1 || { cat "$tmp/same.log"; fail "--resume --epochs 2 of a 2-epoch run exited non-zero"; }
grep -q "is finished: it trained all 2 epochs" "$tmp/same.log" || { cat "$tmp/same.log"; fail "--epochs 2: no 'finished' line"; }
"$convoy" train --resume "$tmp/short" --epochs 1 >"$tmp/fewer.log" 2>&1
[[ $? == 2 ]] && grep -q "has already trained 2 epochs; give more" "$tmp/fewer.log" || { cat "$tmp/fewer.log"; fail "--resume --epochs 1 after 2 epochs"; }
"$convoy" train --resume "$tmp/short" --epochs 4 >"$tmp/more.log" 2>&1 || { cat "$tmp/more.log"; fail "--resume --epochs 4"; }
"$convoy" train "${common[@]}" --epochs 4 --out "$tmp/long" >/dev/null 2>&1 || fail "4-epoch run"
cmp -s "$tmp/short/model.safetensors" "$tmp/long/model.safetensors" ||
  fail "--resume --epochs 4 after 2 epochs differs from a 4-epoch run"
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert len(s['history']) == 4 and s['epochs'] == 4, s['epochs']" \
  "$tmp/short/summary.json" || fail "the continued run's summary"
"$convoy" train --resume "$tmp/short" --epochs 3 >"$tmp/less.log" 2>&1
[[ $? -eq 2 ]] || fail "--epochs below the trained count should exit 2"
echo "ok: --resume --epochs 4 after 2 epochs is bit-identical to a 4-epoch run"
