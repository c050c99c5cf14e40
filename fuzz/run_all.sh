#!/usr/bin/env bash
# Runs every fuzz target built in BUILD_DIR for SECONDS each, starting from
# its seed corpus fuzz/corpus/<name>/ (copied to a temporary folder, so runs
# never change the repository), and fails on the first crash, leak, timeout
# or sanitizer report. Crash inputs are kept in BUILD_DIR/fuzz-artifacts/.
#   fuzz/run_all.sh SECONDS [BUILD_DIR]          (BUILD_DIR: build-fuzz)
# Prints one line per target with its executions count.
set -uo pipefail
seconds="${1:?usage: fuzz/run_all.sh SECONDS [BUILD_DIR]}"
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${2:-$here/../build-fuzz}" && pwd)" || { echo "run_all: no build folder; configure with -DCONVOY_FUZZ=ON"; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"

shopt -s nullglob
targets=()
for source in "$here"/fuzz_*.cpp; do targets+=("$(basename "$source" .cpp)"); done
((${#targets[@]})) || { echo "run_all: no fuzz/fuzz_*.cpp"; exit 2; }
failures=0
for target in "${targets[@]}"; do
  name="${target#fuzz_}"
  binary=$(find "$build" -type f -name "$target" -perm -u+x | head -n 1)
  if [[ -z "$binary" ]]; then
    echo "FAIL $target: not built in $build (cmake --build $build --target fuzz)"
    failures=$((failures + 1))
    continue
  fi
  corpus="$work/$name"
  mkdir -p "$corpus"
  [[ -d "$here/corpus/$name" ]] && cp -r "$here/corpus/$name/." "$corpus/"
  options=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
           -artifact_prefix="$artifacts/$target-")
  [[ -f "$here/$name.dict" ]] && options+=(-dict="$here/$name.dict")
  log="$work/$target.log"
  ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    "$binary" "${options[@]}" "$corpus" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  if [[ $rc -ne 0 ]]; then
    echo "FAIL $target (exit $rc) after ${runs:-?} runs; input kept in $artifacts:"
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$log" | head -n 20
    failures=$((failures + 1))
  else
    echo "ok   $target: ${runs:-?} runs in ${seconds} s"
  fi
done
echo "$failures of ${#targets[@]} fuzz targets failed"
[[ $failures -eq 0 ]]
