# Sourced by the CLI's shell tests: a scratch folder (removed at exit) as the
# working directory, a failure counter, and the one-line-error check.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# expect_error NAME NEEDLE -- ARGS...: `$convoy ARGS` exits 2 with one stderr line containing NEEDLE.
# With expect_error_out=DIR set, every case also asks for `--out DIR` and must
# leave no DIR/summary.json (a failed run writes no half output).
expect_error_out=""
expect_error() {
  local name="$1" needle="$2"
  shift 3
  local extra=()
  if [[ -n "$expect_error_out" ]]; then
    rm -rf "$expect_error_out"
    extra=(--out "$expect_error_out")
  fi
  "$convoy" "$@" "${extra[@]}" >out 2>err
  local rc=$? lines
  lines=$(wc -l <err)
  if [[ $rc -ne 2 || $lines -ne 1 ]] || ! grep -qF -- "$needle" err; then
    fail "$name: rc=$rc, $lines stderr lines, wanted one naming '$needle':"
    cat err
  else
    echo "ok   $name: $(cat err)"
  fi
  if [[ -n "$expect_error_out" && -e "$expect_error_out/summary.json" ]]; then
    fail "$name: summary.json written by a failed run"
  fi
}

# finish: the summary line and the exit status.
finish() {
  [[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
  echo "all $1 checks passed"
}
