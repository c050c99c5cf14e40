#!/usr/bin/env bash
# Device discovery and --device, on any machine: `convoy devices` says whether
# a GPU is usable (and, if not, why, in one line); `train --device auto` uses
# the GPU when there is one and otherwise falls back to the CPU, saying so in
# one line only when a GPU is present but unusable; `--device cuda` without a usable GPU is a user error (exit 2).
# PJRT names (pjrt, pjrt:PLUGIN.so, tpu, pjrt-gpu) fall back like auto when
# their plugin or device is missing, and train on XLA's CPU plugin when present.
# `--strategy nccl` (replicas on GPUs) without a GPU, or in a build without
# NCCL, stops in one line saying why (exit 2), and never trains on the CPU.
# Trains one epoch on tiny generated IDX files, so it takes a second.
set -u
convoy="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# IDX files: 16 training and 8 test images of 28x28 zeros, labels 0.
be32() { printf "\\x$(printf %02x $(($1 >> 24 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 & 255)))"; }
idx_images() { { printf '\x00\x00\x08\x03'; be32 "$2"; be32 28; be32 28; head -c $(($2 * 784)) /dev/zero; } >"$1"; }
idx_labels() { { printf '\x00\x00\x08\x01'; be32 "$2"; head -c "$2" /dev/zero; } >"$1"; }
mkdir -p "$tmp/data"
idx_images "$tmp/data/train-images-idx3-ubyte" 16
idx_labels "$tmp/data/train-labels-idx1-ubyte" 16
idx_images "$tmp/data/t10k-images-idx3-ubyte" 8
idx_labels "$tmp/data/t10k-labels-idx1-ubyte" 8

"$convoy" devices >"$tmp/devices" 2>&1 || fail "convoy devices exited $?"
cat "$tmp/devices"
if grep -q '^auto  picks: cuda' "$tmp/devices"; then
  gpu=1
  grep -q '^cuda:0 ' "$tmp/devices" || fail "devices: picks cuda but lists no cuda:0"
else
  gpu=0
  [[ $(grep -c '^cuda  none usable: ' "$tmp/devices") -eq 1 ]] || fail "devices: no GPU, but no one line saying why"
fi

train=(train --data "$tmp/data" --epochs 1 --batch-size 8 --progress lines)
"$convoy" "${train[@]}" --device auto >"$tmp/auto" 2>&1 || fail "--device auto exited $?"
fallbacks=$(grep -c 'no usable GPU (.*); training on the CPU' "$tmp/auto")
if [[ $gpu -eq 1 ]]; then
  [[ $fallbacks -eq 0 ]] || fail "--device auto fell back although a GPU is usable"
  grep -q '| cuda:0' "$tmp/auto" || fail "--device auto did not train on cuda:0"
elif grep -q '^cuda:[0-9]' "$tmp/devices"; then  # a GPU, but not one convoy can use: say so, once
  [[ $fallbacks -eq 1 ]] || fail "--device auto beside an unusable GPU: wanted one fallback line, got $fallbacks"
  grep -q '| cpu,' "$tmp/auto" || fail "--device auto did not train on the cpu"
  echo "ok   auto falls back: $(grep 'training on the CPU' "$tmp/auto")"
else  # no GPU at all: the CPU is no news (as PyTorch); the header names it
  [[ $fallbacks -eq 0 ]] || fail "--device auto without any GPU printed $fallbacks fallback line(s)"
  grep -q '| cpu,' "$tmp/auto" || fail "--device auto did not train on the cpu"
  echo "ok   auto on a machine without a GPU trains on the CPU without a fallback line"
fi

"$convoy" "${train[@]}" --device cpu >"$tmp/cpu" 2>&1 || fail "--device cpu exited $?"
grep -q 'no usable GPU' "$tmp/cpu" && fail "--device cpu printed a fallback line"

"$convoy" "${train[@]}" --device cuda >"$tmp/cuda" 2>"$tmp/cuda.err"
rc=$?
if [[ $gpu -eq 1 ]]; then
  [[ $rc -eq 0 ]] || fail "--device cuda exited $rc on a machine with a usable GPU"
else
  [[ $rc -eq 2 && $(wc -l <"$tmp/cuda.err") -eq 1 ]] && grep -q -- '--device cuda: no usable GPU' "$tmp/cuda.err" ||
    fail "--device cuda without a GPU: rc=$rc, wanted 2 and one line: $(cat "$tmp/cuda.err")"
  echo "ok   --device cuda: $(cat "$tmp/cuda.err")"
fi

"$convoy" "${train[@]}" --device npu >/dev/null 2>"$tmp/npu.err"
rc=$?
[[ $rc -eq 2 ]] && grep -q "'npu' is not auto, cpu, cuda" "$tmp/npu.err" || fail "--device npu: rc=$rc, $(cat "$tmp/npu.err")"

# PJRT plugins (docs/accelerators.md): a missing plugin, or one whose
# accelerator is absent, falls back to the CPU in one line, as auto does.
for name in pjrt:/no/such/libpjrt.so tpu pjrt-gpu; do
  "$convoy" "${train[@]}" --device "$name" >"$tmp/pjrt" 2>&1 || fail "--device $name exited $?"
  if grep -q '| pjrt:' "$tmp/pjrt"; then
    echo "ok   --device $name trains on $(grep -o 'pjrt:[a-z]*' "$tmp/pjrt" | head -1)"
  else
    [[ $(grep -c -- "--device $name: .*; training on the CPU" "$tmp/pjrt") -eq 1 ]] && grep -q '| cpu,' "$tmp/pjrt" ||
      fail "--device $name without its plugin: wanted one fallback line and the CPU: $(cat "$tmp/pjrt")"
    echo "ok   $(grep -- 'training on the CPU' "$tmp/pjrt")"
  fi
done
# XLA's CPU plugin, when installed (bash setup.sh), trains the seed CNN.
if grep -q '^pjrt  cpu |' "$tmp/devices"; then
  "$convoy" "${train[@]}" --device pjrt >"$tmp/pjrt" 2>&1 || fail "--device pjrt exited $?: $(cat "$tmp/pjrt")"
  grep -q '| pjrt:cpu,' "$tmp/pjrt" || fail "--device pjrt did not train on pjrt:cpu: $(cat "$tmp/pjrt")"
  grep -q 'test accuracy' "$tmp/pjrt" || fail "--device pjrt: no test accuracy: $(cat "$tmp/pjrt")"
  echo "ok   --device pjrt trains on XLA's CPU plugin"
else
  echo "skip --device pjrt: $(grep '^pjrt ' "$tmp/devices")"
fi

# --strategy nccl: one replica per GPU. Without mpirun it is one replica.
"$convoy" "${train[@]}" --strategy nccl >"$tmp/nccl" 2>"$tmp/nccl.err"
rc=$?
if [[ $gpu -eq 1 && $rc -eq 0 ]]; then
  grep -q '| cuda:0' "$tmp/nccl" || fail "--strategy nccl did not train on cuda:0"
  echo "ok   --strategy nccl trains on the GPU"
elif [[ $gpu -eq 1 ]]; then  # a build without NCCL or MPI says what to install
  [[ $rc -eq 2 && $(wc -l <"$tmp/nccl.err") -eq 1 ]] && grep -q -- '--strategy nccl: .*\(install\|reconfigure\|libnccl\)' "$tmp/nccl.err" ||
    fail "--strategy nccl with a GPU: rc=$rc, wanted 0, or 2 and one line saying what is missing: $(cat "$tmp/nccl.err")"
  echo "ok   --strategy nccl: $(cat "$tmp/nccl.err")"
else
  [[ $rc -eq 2 && $(wc -l <"$tmp/nccl.err") -eq 1 ]] && grep -q -- '--strategy nccl' "$tmp/nccl.err" &&
    grep -q 'no usable GPU\|install\|reconfigure' "$tmp/nccl.err" ||
    fail "--strategy nccl without a GPU: rc=$rc, wanted 2 and one line saying why: $(cat "$tmp/nccl.err")"
  grep -q 'cpu,' "$tmp/nccl" && fail "--strategy nccl trained on the CPU"
  echo "ok   --strategy nccl: $(cat "$tmp/nccl.err")"
fi
"$convoy" "${train[@]}" --strategy nccl --device cpu >/dev/null 2>"$tmp/nccl_cpu.err"
rc=$?
[[ $rc -eq 2 && $(wc -l <"$tmp/nccl_cpu.err") -eq 1 ]] && grep -q -- '--strategy mpi' "$tmp/nccl_cpu.err" ||
  fail "--strategy nccl --device cpu: rc=$rc, $(cat "$tmp/nccl_cpu.err")"

[[ $failures -eq 0 ]] && echo "cuda_fallback: all passed" || { echo "cuda_fallback: $failures failed"; exit 1; }
