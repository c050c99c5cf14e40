#!/usr/bin/env bash
# `convoy train --device pjrt --replicas N` end to end on a small
# Fashion-MNIST (a few seconds): N replicas in one program on XLA's CPU
# plugin, the run's header and summary.json say so, a checkpoint resumes with
# them; and the user errors, each one line with exit code 2: --replicas
# without a PJRT device, with a plugin that is missing, beside --strategy
# mpi, and 0. The accuracy run (the seed CNN, 15 epochs) is
# bench/pjrt_replicas.sh.
set -u
convoy="$(realpath "$1")"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/cli_test_lib.sh"  # works in a scratch folder
source "$here/small_data.sh"
make_small_fashion data 256 64

train=(train --data data --batch-size 8 --progress lines)
expect_error "--replicas 0" "training.replicas (--replicas) must be at least 1" -- "${train[@]}" --replicas 0
expect_error "--replicas on the CPU" "use it with --device pjrt" -- "${train[@]}" --device cpu --replicas 2
expect_error "--replicas beside --strategy mpi" "two ways to make replicas" -- \
  "${train[@]}" --device pjrt --replicas 2 --strategy mpi
expect_error "--replicas with a missing plugin" "needs a PJRT device: --device pjrt:/no/such/plugin.so" -- \
  "${train[@]}" --device pjrt:/no/such/plugin.so --replicas 2

"$convoy" devices >devices 2>&1
if ! grep -q '^pjrt  cpu |' devices; then
  echo "skip --device pjrt --replicas: $(grep '^pjrt ' devices)"
  finish pjrt_replicas
  exit 0
fi

if ! "$convoy" "${train[@]}" --device pjrt --replicas 4 --sync-bn --scale-lr --epochs 1 --out run >log 2>&1; then
  fail "--device pjrt --replicas 4 exited $?: $(cat log)"
  finish pjrt_replicas
fi
grep -q '| pjrt:cpu,' log || fail "--replicas 4 did not train on pjrt:cpu: $(cat log)"
grep -q '4 replicas in one program (pjrt:cpu): global batch 32, lr scaled by replicas, synchronised batch norm' log ||
  fail "--replicas 4: no replicas line: $(cat log)"
grep -q 'lr 0.04' log || fail "--replicas 4 --scale-lr: lr 0.01 x 4 not in the header: $(cat log)"
grep -q 'test accuracy' log || fail "--replicas 4: no test accuracy: $(cat log)"
grep -q '"replicas": *4' run/summary.json || fail "summary.json does not record 4 replicas"
[[ $failures -eq 0 ]] && echo "ok   $(grep 'replicas in one program' log | sed 's/^ *//')"

"$convoy" train --resume run --epochs 2 --progress lines >resume 2>&1 ||
  fail "--resume of a 4-replica run exited $?: $(cat resume)"
grep -q '4 replicas in one program' resume && grep -q 'resuming after epoch 1' resume ||
  fail "--resume did not continue with 4 replicas: $(cat resume)"
[[ $failures -eq 0 ]] && echo "ok   --resume continues with the run's 4 replicas"
finish pjrt_replicas
