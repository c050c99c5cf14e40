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
# (timeout: a re-execution loop fails instead of hanging.)
read_by_libgomp() { env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose "$@" timeout 60 "$convoy" train --help 2>&1 |
  awk -F"'" '/GOMP_SPINCOUNT = / { spin = $2; n++ } /OMP_WAIT_POLICY = / { policy = $2 }
             /OMP_NUM_THREADS = / { threads = $2 } END { print spin, policy, n, threads }'; }
cores=$(nproc)

got=$(read_by_libgomp env)
[[ $got == "10000 PASSIVE 2 $cores" ]] || fail "convoy train with nothing set: libgomp read '$got', want spin 10000 after one re-execution"
got=$(read_by_libgomp env GOMP_SPINCOUNT=777)
[[ $got == "777 PASSIVE 1 $cores" ]] || fail "GOMP_SPINCOUNT=777: libgomp read '$got', want the user's 777 and no re-execution"
got=$(read_by_libgomp env OMP_WAIT_POLICY=active)
[[ $got == *" ACTIVE 1 $cores" ]] || fail "OMP_WAIT_POLICY=active: libgomp read '$got', want the user's policy untouched"
# Thread binding: libgomp binds the first thread as it loads and the mask
# would survive an exec, leaving the second image one CPU: no re-execution.
got=$(read_by_libgomp env OMP_PLACES=cores OMP_PROC_BIND=close)
[[ $got == "300000 PASSIVE 1 $cores" ]] || fail "OMP_PLACES=cores: libgomp read '$got', want no re-execution and all $cores CPUs"
# Started through the loader, the program the kernel runs is ld.so: no re-execution, and it works.
loader=$(readelf -l "$convoy" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
if [[ -x $loader ]]; then
  # (A sanitizer build reports the loader's own allocations as leaks when started this way.)
  out=$(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY ASAN_OPTIONS=detect_leaks=0 timeout 60 "$loader" "$convoy" train --help 2>&1) ||
    fail "$loader $convoy train --help failed: ${out:0:300}"
  [[ $out == *"--epochs"* ]] || fail "$loader $convoy train --help printed no help: ${out:0:300}"
fi
# Under valgrind the program the kernel runs is valgrind: no re-execution, and it works
# (not for a sanitizer build, which valgrind cannot run at all).
if command -v valgrind >/dev/null && ! grep -q -a __asan_init "$convoy"; then
  out=$(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY timeout 120 valgrind --tool=none -q "$convoy" train --help 2>&1) ||
    fail "valgrind $convoy train --help failed: ${out:0:300}"
  [[ $out == *"--epochs"* ]] || fail "valgrind $convoy train --help printed no help: ${out:0:300}"
fi
# The re-executed process keeps its name (ps, pgrep and killall find "convoy").
data=/usr/share/datasets/fashion-mnist
if [[ -r $data/train-images-idx3-ubyte.gz || -r $data/train-images-idx3-ubyte ]]; then
  out_dir=$(mktemp -d); trap 'rm -rf "$out_dir"' EXIT
  env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY "$convoy" train --epochs 50 --threads 2 --progress quiet \
    --out "$out_dir/run" >/dev/null 2>&1 &
  pid=$!
  name=""
  for _ in $(seq 50); do
    sleep 0.1
    grep -q '^GOMP_SPINCOUNT=' <(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null) && { name=$(cat "/proc/$pid/comm"); break; }
  done
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  [[ $name == "$(basename "$(realpath "$convoy")" | cut -c1-15)" ]] || fail "the re-executed training is named '$name', want its program's name"
fi
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
