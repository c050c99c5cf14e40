#!/usr/bin/env bash
# Data-parallel training on GPUs (--strategy nccl), 2 replicas on 2 GPUs of
# this machine, as tests/dist.sh does for the MPI strategy on CPUs:
#   1. convoy_nccl_mpi_tests: 2 replicas with batch B end with the weights of
#      1 replica with batch 2B (1e-5 per tensor, fp32), with one allreduce or
#      buckets, with synchronised BN; the replicas stay bit-identical;
#   2. `convoy train --strategy nccl --scale-lr`, full Fashion-MNIST, 3
#      epochs: one progress display, one set of outputs, accuracy in one
#      process's band (>= 86%: the CPU's 2 replicas reach 87.88%);
#   3. a hung worker (SIGSTOP): the other prints why and exits non-zero
#      within --dist-timeout (NCCL's collectives are watched on the GPU);
#   4. a killed worker (SIGKILL): the job ends non-zero within seconds.
# Exits 77 (skipped), saying why, with fewer than 2 usable GPUs (NCCL takes
# one replica per GPU, so one GPU cannot host two), without mpirun, or when
# convoy was built without the nccl strategy. bench/gpu_check.sh runs it.
#
#   bash tests/nccl_replicas.sh CONVOY [NCCL_MPI_TESTS] [DATA]
set -eu
convoy="$1"
mpi_tests="${2:-}"
data="${3:-/usr/share/datasets/fashion-mnist}"
gpus=$("$convoy" devices 2>/dev/null | grep -c '^cuda:[0-9]' || true)
if ((gpus < 2)); then
  echo "skip: $gpus GPU(s) visible; NCCL takes one replica per GPU, so 2 replicas need 2 GPUs"
  exit 77
fi
if ! command -v mpirun >/dev/null; then echo "skip: mpirun not found (apt-get install openmpi-bin)"; exit 77; fi
if [[ -z "$mpi_tests" || ! -x "$mpi_tests" ]]; then
  echo "skip: convoy_nccl_mpi_tests was not built (it needs NCCL, MPI and the CUDA backend at build time)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # containers run as root
mpi=(mpirun -np 2)
source "$(dirname "$0")/replica_job_lib.sh"  # $tmp, start, ranks, seconds, fail
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(seconds)"; }

SECONDS=0
echo "== 1. equivalence with one replica of the global batch (at ${SECONDS} s)"
NVIDIA_TF32_OVERRIDE=0 "${mpi[@]}" "$mpi_tests" --gtest_brief=1 || fail "convoy_nccl_mpi_tests"

train=(train --strategy nccl --device cuda --data "$data" --seed 4 --progress lines)

echo "== 2. 2 replicas train the seed CNN to one process's band, with one set of outputs (at ${SECONDS} s)"
"${mpi[@]}" "$convoy" "${train[@]}" --epochs 3 --scale-lr --out "$tmp/e2e" >"$tmp/e2e.log" 2>&1 ||
  { cat "$tmp/e2e.log"; fail "training"; }
cat "$tmp/e2e.log"
grep -q "2 replicas (nccl)" "$tmp/e2e.log" || fail "the run did not say it has 2 replicas (nccl)"
grep -q "| cuda:" "$tmp/e2e.log" || fail "the run did not train on a GPU"
[[ $(grep -c "^epoch   3/3" "$tmp/e2e.log") -eq 1 ]] || fail "expected one progress display"
[[ $(tail -n +2 "$tmp/e2e/history.csv" | wc -l) -eq 3 ]] || fail "history.csv"
python3 - "$tmp/e2e/summary.json" <<'PY' || fail "accuracy or summary"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["replicas"] == 2, s["replicas"]
assert s["test_accuracy"] >= 0.86, s["test_accuracy"]
print(f"ok: test accuracy {s['test_accuracy']:.4f} on 2 GPU replicas (band: >= 0.86)")
PY

echo "== 3. a hung worker: the other stops within --dist-timeout (at ${SECONDS} s)"
start "${mpi[@]}" "$convoy" "${train[@]}" --epochs 20 --dist-timeout 5
for _ in $(seq 1200); do grep -q "epoch   1/" "$tmp/job.log" && break; sleep 0.05; done
victim=$(ranks | tail -1)
[[ -n "$victim" ]] || { cat "$tmp/job.log"; fail "no worker process found"; }
t0=$(seconds)
kill -STOP "$victim"
rc=0; wait "$job" || rc=$?; job=""
waited=$(elapsed "$t0")
kill -9 "$victim" 2>/dev/null || true
cat "$tmp/job.log"
[[ $rc -ne 0 ]] || fail "the job exited 0 with a hung worker"
grep -q "convoy: error: replica . of 2 waited . s for the other replicas" "$tmp/job.log" ||
  fail "the waiting replica did not say why it stopped"
python3 -c "import sys; sys.exit(float(sys.argv[1]) > 5 + 10)" "$waited" || fail "stopping took ${waited}s (timeout 5s)"
echo "hung worker: the other stopped after ${waited}s (timeout 5 s) with exit code $rc"

echo "== 4. a killed worker stops the job (at ${SECONDS} s)"
start "${mpi[@]}" "$convoy" "${train[@]}" --epochs 20 --dist-timeout 20
for _ in $(seq 1200); do grep -q "epoch   1/" "$tmp/job.log" && break; sleep 0.05; done
victim=$(ranks | tail -1)
[[ -n "$victim" ]] || { cat "$tmp/job.log"; fail "no worker process found"; }
t0=$(seconds)
kill -9 "$victim"
rc=0; wait "$job" || rc=$?; job=""
waited=$(elapsed "$t0")
[[ $rc -ne 0 ]] || fail "the job exited 0 after a worker was killed"
python3 -c "import sys; sys.exit(float(sys.argv[1]) > 25)" "$waited" || fail "the job took ${waited}s to stop (limit 25s)"
echo "killed worker: the job stopped after ${waited}s with exit code $rc"
echo "4 passed, 0 failed (${SECONDS} s)"
