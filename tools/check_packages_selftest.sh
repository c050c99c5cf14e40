#!/usr/bin/env bash
# Shows that the packaging audit (tools/check_packages.sh) can fail: with
# setup.sh's list as it is it passes; with one package taken out of a copy
# of the list it fails and names that package and a file of it the build
# read. The packages taken out are ones the build reads directly and that
# nothing else in the list pulls in:
#   libyaml-cpp-dev      yaml-cpp's headers and CMake package (YAML run configs)
#   ocl-icd-opencl-dev   libOpenCL.so, which oneDNN's CMake package links
#                        (issue 17: a fresh machine stopped at configure)
#   tools/check_packages_selftest.sh [BUILD_DIR]    # default build/, built
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
audit="$root/tools/check_packages.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0

if out="$("$audit" "$build" 2>&1)"; then
  echo "selftest: the full list passes: ${out##*$'\n'}"
else
  echo "$out"
  echo "selftest: FAIL: the audit fails with setup.sh's own list"
  failures=$((failures + 1))
fi

# without PACKAGE(s) [separated by blanks], expect a failure naming the first,
# with a file whose path contains EVIDENCE
expect_missing() {
  local evidence="$1"; shift
  local list="$tmp/setup-without-$1.sh" p
  cp "$root/setup.sh" "$list"
  for p in "$@"; do
    sed -i -E "/^[[:space:]]*packages=\(/,/^[[:space:]]*\)/ s/(^|[[:space:]])${p//./\\.}([[:space:]]|$)/\1\2/" "$list"
  done
  if cmp -s "$root/setup.sh" "$list"; then
    echo "selftest: FAIL: $* not in setup.sh's packages (update this test)"
    failures=$((failures + 1)); return
  fi
  local rc=0
  out="$("$audit" --list "$list" "$build" 2>&1)" || rc=$?
  if [[ $rc -eq 1 ]] && grep -q "^check_packages: MISSING package $1:" <<<"$out" &&
     grep -q "^  [^ ]*$evidence.*(package $1)" <<<"$out"; then
    echo "selftest: without $*: fails as it should:"
    grep -E "^check_packages: (MISSING|FAIL)" <<<"$out" | sed 's/^/  /'
    grep -m2 "(package $1)" <<<"$out" | sed 's/^/  /'
  else
    echo "$out"
    echo "selftest: FAIL: without $* the audit should fail (exit 1) naming $1 and a $evidence file; it exited $rc"
    failures=$((failures + 1))
  fi
}
expect_missing /usr/include/yaml-cpp/ libyaml-cpp-dev
expect_missing libOpenCL.so ocl-icd-opencl-dev opencl-c-headers

if ((failures)); then echo "selftest: $failures check(s) failed"; exit 1; fi
echo "selftest: OK"
