#!/usr/bin/env bash
# One binary for every x86-64 (cmake/isa_units.cmake): the library is built for
# the x86-64 baseline, and only the per-instruction-set copies of the kernels
# use wider instructions. Disassembles the binary and fails naming every
# function outside those copies that holds an AVX-512 (EVEX) or AVX/AVX2 (VEX)
# instruction, and every AVX-512 instruction in the AVX2 copy. Also checks that
# `convoy devices` names the kernel set this CPU picks.
#   tests/isa_dispatch.sh build/convoy
set -euo pipefail
convoy="$1"
if grep -q '^CONVOY_NATIVE:BOOL=ON' "$(dirname "$convoy")/CMakeCache.txt" 2>/dev/null; then
  echo "skip: this build is -march=native (CONVOY_NATIVE=ON), not portable"; exit 77
fi
command -v objdump >/dev/null || { echo "skip: objdump (binutils) is missing"; exit 77; }

# objdump -d -w: "<addr> <name>:" opens a function; instruction lines are
# "addr:<TAB>bytes<TAB>mnemonic". In 64-bit mode 0x62 starts only EVEX and
# 0xc4/0xc5 only VEX (after any legacy prefixes).
report=$(objdump -d -w --no-addresses "$convoy" 2>/dev/null | awk '
  /^<.*>:$/ { fn = substr($0, 2, length($0) - 3); next }
  /^\t/ {
    n = split($0, part, "\t"); if (n < 3) next
    split(part[2], b, " "); i = 1
    while (b[i] ~ /^(66|67|f2|f3|2e|3e|26|64|65|36|f0)$/) i++
    kind = b[i] == "62" ? "evex" : (b[i] == "c4" || b[i] == "c5") ? "vex" : ""
    if (kind == "") next
    allowed = fn ~ /^isa_avx512\./ || fn ~ /^convoy_[a-z_]+_avx512$/ || (kind == "vex" && (fn ~ /^isa_avx2\./ || fn ~ /^convoy_[a-z_]+_avx2$/))
    if (!allowed && !(fn in seen)) { seen[fn] = 1; printf "%s %s\n", kind, fn }
  }')
copies=$(objdump -t "$convoy" | grep -c ' isa_avx512\.' || true)
if ((copies == 0)); then echo "FAIL: no AVX-512 kernel copy in $convoy (cmake/isa_units.cmake not applied?)"; exit 1; fi
if [[ -n $report ]]; then
  echo "FAIL: wide instructions outside the dispatched kernel copies (kind, function):"
  echo "$report" | head -40
  exit 1
fi
echo "ok: no AVX or AVX-512 instruction outside the per-ISA copies ($copies AVX-512 copy symbols)"

line=$("$convoy" devices | grep 'kernels:') || { echo "FAIL: convoy devices does not name the kernel set"; exit 1; }
want=base
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw bmi2 /proc/cpuinfo && want=avx2
grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo &&
  grep -qw avx512vl /proc/cpuinfo && want=avx512
[[ $line == *"kernels: $want "* ]] || { echo "FAIL: convoy devices says '$line'; this CPU's best is $want"; exit 1; }
echo "ok: $line"
