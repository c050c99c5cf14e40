#!/usr/bin/env bash
# convoy trains with OpenMP's idle spin bounded (GOMP_SPINCOUNT=10000) unless
# the user chose one (src/cli/openmp_spin_default.cpp). libgomp reads the
# variable only when it loads, so this asks libgomp itself what it read
# (OMP_DISPLAY_ENV=verbose prints its settings as it loads, once per image).
#   tests/openmp_spin.sh build/convoy
set -euo pipefail
convoy="$1"
fail() { echo "FAIL: $*"; exit 1; }
shown=$(OMP_DISPLAY_ENV=verbose "$convoy" devices 2>&1)
if [[ $shown != *"GOMP_SPINCOUNT = "* ]]; then
  echo "skip: this OpenMP runtime is not libgomp (it does not print GOMP_SPINCOUNT)"; exit 77
fi
# What libgomp loaded with, last image first; and how many images loaded it.
read_by_libgomp() { env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose "$@" "$convoy" train --help 2>&1 |
  awk -F"'" '/GOMP_SPINCOUNT = / { spin = $2; n++ } /OMP_WAIT_POLICY = / { policy = $2 } END { print spin, policy, n }'; }

got=$(read_by_libgomp env)
[[ $got == "10000 PASSIVE 2" ]] || fail "convoy train with nothing set: libgomp read '$got', want spin 10000 after one re-execution"
got=$(read_by_libgomp env GOMP_SPINCOUNT=777)
[[ $got == "777 PASSIVE 1" ]] || fail "GOMP_SPINCOUNT=777: libgomp read '$got', want the user's 777 and no re-execution"
got=$(read_by_libgomp env OMP_WAIT_POLICY=active)
[[ $got == *" ACTIVE 1" ]] || fail "OMP_WAIT_POLICY=active: libgomp read '$got', want the user's policy untouched"
# Commands that run no model start once.
n=$(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose "$convoy" devices 2>&1 | grep -c "GOMP_SPINCOUNT = ")
[[ $n == 1 ]] || fail "convoy devices started $n times, want once"
[[ $(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY "$convoy" devices) == *"idle OpenMP threads in training: spin 10000 pauses"*"convoy's default"* ]] ||
  fail "convoy devices does not name the spin training runs with"
# The re-executed program is the same process with the same arguments: a
# careless flag still gets its one-line error and exit code 2.
set +e
err=$(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY "$convoy" train --epochs nope 2>&1 >/dev/null); rc=$?
set -e
[[ $rc == 2 ]] || fail "train --epochs nope exited $rc after the re-execution, want 2 ($err)"
echo "ok: libgomp spins 10000 in training unless the user chose; user settings and other commands untouched"
