#!/usr/bin/env bash
# Held-out models through the CLI (tests/held_out_models.h; the configs come
# from tests/test_held_out_models.cpp's HeldOutModelCases): each valid one is
# summarised, trained, exported to ONNX, predicted with and resumed; each
# invalid one is one error line naming the layer, exit 2, and no output.
#   tests/held_out_cli.sh build/convoy build/tests/convoy_tests
set -u
shopt -s nullglob  # no cases: empty loops that the counts below refuse, not a literal pattern
convoy="$1"
tests="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$convoy" demo-data plant --out "$tmp/data" --train 48 --test 8 --size 40x32 >/dev/null || { echo "FAIL: demo data"; exit 1; }
mkdir "$tmp/cases"
CONVOY_HELD_OUT_DIR="$tmp/cases" CONVOY_HELD_OUT_DATA="$tmp/data" OMP_NUM_THREADS=2 \
  "$tests" --gtest_filter=HeldOutModelCases.Write >/dev/null || { echo "FAIL: writing the cases"; exit 1; }

count=0
for config in "$tmp"/cases/cli_*.json; do
  name=$(basename "$config" .json)
  run="$tmp/runs/$name"
  count=$((count + 1))
  "$convoy" summary --config "$config" >"$tmp/summary" 2>&1 || { fail "$name: summary"; cat "$tmp/summary"; continue; }
  "$convoy" train --config "$config" --threads 2 --progress quiet --out "$run" >"$tmp/train" 2>&1 ||
    { fail "$name: train"; cat "$tmp/train"; continue; }
  grep -q "^test_accuracy" "$tmp/train" || { fail "$name: no test accuracy"; cat "$tmp/train"; }
  "$convoy" export --checkpoint "$run" --onnx "$run/model.onnx" >"$tmp/export" 2>&1 || { fail "$name: export"; cat "$tmp/export"; }
  "$convoy" export --checkpoint "$run" --onnx "$run/kept.onnx" --keep-batch-norm >"$tmp/export" 2>&1 ||
    { fail "$name: export --keep-batch-norm"; cat "$tmp/export"; }
  "$convoy" summary --onnx "$run/model.onnx" >"$tmp/back" 2>&1 || { fail "$name: summary --onnx of its export"; cat "$tmp/back"; }
  "$convoy" predict --checkpoint "$run" --input "$tmp/data/images" --output "$run/pred.csv" >"$tmp/predict" 2>&1 ||
    { fail "$name: predict"; cat "$tmp/predict"; }
  [[ $(wc -l <"$run/pred.csv") -eq 57 ]] || fail "$name: predict wrote $(wc -l <"$run/pred.csv") lines, not 1 + 56"
  ! grep -qiE "nan|inf" "$run/pred.csv" || fail "$name: predictions not finite"
  "$convoy" train --resume "$run" --epochs 2 --progress quiet >"$tmp/resume" 2>&1 || { fail "$name: resume"; cat "$tmp/resume"; }
  [[ $(grep -c "" "$run/history.csv") -eq 3 ]] || fail "$name: history.csv after the resume: $(cat "$run/history.csv")"
done
[[ $count -ge 8 ]] || fail "only $count valid models for the CLI"
echo "ok   $count held-out models: summary, train, export, predict, resume"

invalid=0
for config in "$tmp"/cases/invalid_*.json; do
  name=$(basename "$config" .json)
  invalid=$((invalid + 1))
  for command in summary train; do
    out="$tmp/bad_out"
    args=(--config "$config")
    [[ $command == train ]] && args+=(--out "$out")
    "$convoy" "$command" "${args[@]}" >/dev/null 2>"$tmp/err"
    rc=$?
    ok=1
    [[ $rc -eq 2 && $(wc -l <"$tmp/err") -eq 1 ]] || ok=0
    while read -r words; do grep -qF -- "$words" "$tmp/err" || ok=0; done <"${config%.json}.says"
    [[ -e $out ]] && { ok=0; rm -rf "$out"; }
    if [[ $ok -eq 1 ]]; then echo "ok   $name $command: $(cat "$tmp/err")"; else fail "$name $command: rc=$rc:"; cat "$tmp/err"; fi
  done
done
# held_out_models.h writes 9; none (a vacuous pass) or a few is a failure.
[[ $invalid -ge 8 ]] || fail "only $invalid invalid models for the CLI"
exit $((failures > 0))
