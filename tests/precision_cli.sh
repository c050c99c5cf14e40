#!/usr/bin/env bash
# --precision (training.precision): a misspelt value, bf16 where the CPU (or
# oneDNN's ISA limit) lacks AVX512-BF16, and a resume in another precision
# are each one line and exit 2; a run records its precision in summary.json
# and its checkpoint. The lacking CPU is forced with oneDNN's own
# DNNL_MAX_CPU_ISA, so the refusal is checked on every machine; `convoy
# devices` says whether bf16 runs on AMX tiles.
set -u
convoy="$1"
here=$(cd "$(dirname "$0")" && pwd)
source "$here/cli_test_lib.sh"  # works in a scratch folder
source "$here/small_data.sh"
make_small_fashion data 1280 256

args=(train --data data --epochs 1 --threads 2 --progress quiet --device cpu)
expect_error "unknown precision" "'fp16' is not fp32 or bf16" -- "${args[@]}" --precision fp16
DNNL_MAX_CPU_ISA=AVX512_CORE_VNNI expect_error "bf16 without AVX512-BF16" "--precision bf16: " -- \
  "${args[@]}" --precision bf16

if "$convoy" "${args[@]}" --out fp32 >/dev/null 2>err; then
  grep -q '"precision": "fp32"' fp32/summary.json || fail "summary.json of an fp32 run does not say so"
  expect_error "resume in another precision" "trained in fp32 and a resume keeps it" -- \
    train --resume fp32 --epochs 2 --precision bf16
else
  fail "an fp32 run failed:"; cat err
fi

DNNL_MAX_CPU_ISA=AVX512_CORE_VNNI "$convoy" devices | grep -q -- "--precision bf16: no: " ||
  fail "convoy devices does not say that bf16 cannot run under DNNL_MAX_CPU_ISA=AVX512_CORE_VNNI"
if grep -qw avx512_bf16 /proc/cpuinfo; then
  "$convoy" devices | grep -q -- "--precision bf16: yes" || fail "convoy devices does not offer bf16 on this CPU"
  if grep -qw amx_bf16 /proc/cpuinfo; then
    "$convoy" devices | grep -q -- "--precision bf16: yes (AMX-BF16)" || fail "convoy devices does not say AMX-BF16"
  fi
  DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 "$convoy" devices | grep -q -- "--precision bf16: yes (AVX512-BF16, no AMX)" ||
    fail "convoy devices does not say that DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 leaves bf16 without AMX"
  if "$convoy" "${args[@]}" --precision bf16 --out bf16 >/dev/null 2>err; then
    grep -q '"precision": "bf16"' bf16/summary.json || fail "summary.json of a bf16 run does not say so"
    "$convoy" train --resume bf16 --epochs 2 --progress quiet >/dev/null 2>err || { fail "bf16 resume failed:"; cat err; }
    # Inference from the fp32 master weights still works where bf16 cannot run.
    DNNL_MAX_CPU_ISA=AVX512_CORE_VNNI "$convoy" evaluate --checkpoint bf16 >/dev/null 2>err ||
      { fail "evaluating a bf16 run without AVX512-BF16 failed:"; cat err; }
  else
    fail "a bf16 run failed:"; cat err
  fi
else
  echo "skip: bf16 training (this CPU lacks AVX512-BF16; the refusal above is what it gets)"
fi
finish "precision"
