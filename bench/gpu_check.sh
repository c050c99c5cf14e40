#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, in under 10 minutes:
#   1. build convoy with the CUDA backend (Release, -j16), or take a prebuilt
#      bundle (bench/gpu_bundle.sh) when this machine lacks the build's libraries;
#   2. run the GPU tests in two stages, the slow end-to-end ones apart, each
#      running to the end whatever fails (test_cuda_*.cpp, fp32 with TF32 off: every layer
#      against the CPU, dropout, multiply, frozen layers and uneven "same"
#      padding included; the EfficientNets and transfer learning's frozen
#      backbones end to end; test_nccl.cpp: one-replica NCCL group,
#      synchronised BN) and the device/fallback check; then the nccl strategy
#      with 2 replicas (tests/nccl_replicas.sh: equivalence, accuracy band,
#      hung and killed workers), which needs 2 GPUs, mpirun and an MPI build,
#      and otherwise says it skipped and why;
#   3. the benchmark: 50 epochs of the seed CNN on Fashion-MNIST with the test
#      set evaluated after every epoch (bench/gpu_seed_cnn.yaml: batch 128,
#      32 steps per CUDA graph), end to end, against PyTorch eager and
#      torch.compile on the same GPU (bench/gpu_seed_cnn_torch.py);
#   3b. the PJRT backend through JAX's CUDA plugin, when installed: its
#      parity tests on the GPU plugin and 3 epochs of the seed CNN;
#   4. a short table and a headline, last.
# Every stage has a time limit and logs its duration; everything printed also
# goes to $OUT/gpu_check.txt when $OUT is set (with summary.json and the
# peers' JSON beside it).
#
#   bash bench/gpu_check.sh [--data DIR] [--prebuilt DIR] [--budget SECONDS] [--nccl-only | --pjrt-only]
#
# --data: the four Fashion-MNIST IDX files (default: $CONVOY_DATA, then
#   /usr/share/datasets/fashion-mnist, then .gpu/data).
# --prebuilt: a folder made by bench/gpu_bundle.sh (bin/ and lib/), or a
#   .tar.xz of one; skips the build.
# --budget: seconds for the whole check (default 570).
# --nccl-only: build (or bundle), the GPU tests and the NCCL stage; no benchmark.
# --pjrt-only: build (or bundle) and the PJRT stage alone (JAX's CUDA plugin).
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
data="${CONVOY_DATA:-}"
prebuilt=""
budget=570
nccl_only=0
pjrt_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --prebuilt) prebuilt="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --nccl-only) nccl_only=1; shift ;;
    --pjrt-only) pjrt_only=1; shift ;;
    *) echo "gpu_check: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
deadline=$(($(date +%s) + budget))
work=$(mktemp -d /tmp/convoy-gpu-check.XXXXXX)
out="${OUT:-}"
export root work out

log() { echo "[gpu_check $(date +%H:%M:%S)] $*"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
declare -A stage_status stage_seconds
# stage NAME MAX_SECONDS FUNCTION [ARGS...]: runs the shell function (in a
# fresh bash, under `timeout`) with a limit of MAX_SECONDS, less when the
# budget runs short, and logs its duration and outcome.
stage() {
  local name="$1" max="$2" fn="$3"
  shift 3
  local left=$((deadline - $(date +%s) - 15))
  ((left < max)) || left=$max
  if ((left < 20)); then
    log "stage $name: skipped, the time budget is spent"
    stage_status[$name]="skipped (budget)"
    return 1
  fi
  log "stage $name: start (limit ${left} s)"
  local t0 rc=0
  t0=$(now)
  # stage_limit: the stage's own seconds, for a function that splits them.
  stage_limit=$left timeout --kill-after=10 "$left" bash -c "set -euo pipefail; $(declare -f "$fn"); $fn $(printf '%q ' "$@")" || rc=$?
  stage_seconds[$name]=$(since "$t0")
  if ((rc == 124 || rc == 137)); then
    stage_status[$name]="timed out after ${left} s"
  elif ((rc != 0)); then
    stage_status[$name]="failed (exit $rc)"
  else
    stage_status[$name]="ok"
  fi
  log "stage $name: ${stage_status[$name]}, ${stage_seconds[$name]} s"
  return $rc
}

main() {
# --- 0. the machine
log "machine: $(uname -m), $(nproc) cores; work dir $work"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv || true
command -v nvcc >/dev/null && nvcc --version | tail -2 || log "nvcc: not on PATH"
for d in "$data" /usr/share/datasets/fashion-mnist "$root/.gpu/data"; do
  if [[ -n "$d" && -e "$d/train-images-idx3-ubyte.gz" || -n "$d" && -e "$d/train-images-idx3-ubyte" ]]; then
    data="$d"
    break
  fi
done
[[ -n "$data" && ( -e "$data/train-images-idx3-ubyte.gz" || -e "$data/train-images-idx3-ubyte" ) ]] || {
  log "no Fashion-MNIST IDX files found; pass --data DIR (or copy them to .gpu/data and carry .gpu)"
  exit 2
}
log "data: $data"
export data

# cuDNN and cuBLAS as this machine has them (the system, the CUDA toolkit, or
# the NVIDIA wheels beside PyTorch): a prebuilt bundle links against them.
lib_dirs=()
search_roots=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu /usr/local/lib)
while read -r p; do [[ -d "$p/nvidia" ]] && search_roots+=("$p/nvidia"); done < <(
  python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null || true)
for lib in libcudnn.so.9 libcublas.so.13 libcublasLt.so.13 libnvrtc.so.13 libnccl.so.2; do
  found=$(find "${search_roots[@]}" -name "$lib" 2>/dev/null | head -1 || true)
  if [[ -n "$found" ]]; then
    log "$lib: $found"
    lib_dirs+=("$(dirname "$found")")
  else
    log "$lib: not found under ${search_roots[*]}"
  fi
done
cudnn_lib=$(find "${search_roots[@]}" -name libcudnn.so.9 2>/dev/null | head -1 || true)
# The PJRT backend (docs/accelerators.md): its header from a Python wheel
# (tensorflow ships xla/pjrt/c/pjrt_c_api.h), JAX's CUDA plugin to run on.
site_dirs=$(python3 -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null || true)
pjrt_header=$(for p in $site_dirs "$root/.peers/py/lib"; do find "$p" -maxdepth 7 -path '*include/xla/pjrt/c/pjrt_c_api.h' 2>/dev/null; done | head -1 || true)
pjrt_root=${pjrt_header%/xla/pjrt/c/pjrt_c_api.h}
pjrt_plugin=$(for p in $site_dirs "$root/.peers/py/lib"; do find "$p" -maxdepth 5 -path '*jax_plugins/xla_cuda*/xla_cuda_plugin.so' 2>/dev/null; done | head -1 || true)
log "PJRT: header ${pjrt_header:-not found}; GPU plugin ${pjrt_plugin:-not found}"
# NCCL: convoy loads libnccl.so.2 at run time (found above); a build needs nccl.h.
nccl_root=$(find "${search_roots[@]}" /usr/local/cuda/include /usr/include -name nccl.h 2>/dev/null | head -1 || true)
[[ -n "$nccl_root" ]] && nccl_root=$(cd "$(dirname "$nccl_root")/.." && pwd)
export cudnn_lib nccl_root pjrt_root pjrt_plugin

# --- 1. build, or take the bundle
bin=""
build_convoy() {
  local cudnn_args=()
  if [[ -n "$cudnn_lib" ]]; then
    local inc
    inc=$(cd "$(dirname "$cudnn_lib")/.." && pwd)/include
    [[ -e "$inc/cudnn.h" ]] && cudnn_args=(-DCUDNN_INCLUDE_DIR="$inc" -DCUDNN_LIBRARY="$cudnn_lib")
  fi
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  local nccl_args=()
  [[ -n "$nccl_root" ]] && nccl_args=(-DNCCL_ROOT="$nccl_root")
  [[ -n "$pjrt_root" ]] && nccl_args+=(-DPJRT_ROOT="$pjrt_root")
  # MPI when this machine has it (the nccl strategy and its 2-GPU test need it).
  cmake -S "$root" -B "$root/build-gpu" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCONVOY_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 "${cudnn_args[@]}" "${nccl_args[@]}" &&
    cmake --build "$root/build-gpu" -j16 --target convoy convoy_tests &&
    { cmake --build "$root/build-gpu" -j16 --target convoy_nccl_mpi_tests 2>/dev/null ||
      echo "convoy_nccl_mpi_tests not built (no MPI or NCCL here): the 2-replica NCCL stage will skip"; }
}
if [[ -z "$prebuilt" ]]; then
  if stage build 330 build_convoy; then
    bin="$root/build-gpu"
    tests_bin="$bin/tests/convoy_tests"
    nccl_tests_bin="$bin/tests/convoy_nccl_mpi_tests"
    convoy="$bin/convoy"
  else
    for candidate in "$root/.gpu/bundle" "$root/.gpu/bundle.tar.xz"; do
      [[ -e "$candidate" ]] && prebuilt="$candidate" && break
    done
    [[ -n "$prebuilt" ]] && log "the build failed here; using the prebuilt bundle $prebuilt"
  fi
fi
if [[ -n "$prebuilt" ]]; then
  if [[ "$prebuilt" == *.tar.xz ]]; then
    mkdir -p "$work/bundle"
    tar -xJf "$prebuilt" -C "$work/bundle"
    prebuilt="$work/bundle"
  fi
  convoy="$prebuilt/bin/convoy"
  tests_bin="$prebuilt/bin/convoy_tests"
  nccl_tests_bin="$prebuilt/bin/convoy_nccl_mpi_tests"  # absent: bundles are built without MPI
  lib_dirs=("$prebuilt/lib" "${lib_dirs[@]}")
  bin="$prebuilt"
  stage_status[build]="prebuilt ($prebuilt)"
fi
if [[ -z "$bin" ]]; then
  log "no convoy to run: the build failed and no prebuilt bundle was given (bench/gpu_bundle.sh makes one)"
  exit 1
fi
export LD_LIBRARY_PATH="$(IFS=:; echo "${lib_dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export convoy tests_bin nccl_tests_bin
if ldd "$convoy" | grep -q "not found"; then
  log "convoy's libraries are missing here:"
  ldd "$convoy" | grep "not found"
fi
"$convoy" devices || true
"$convoy" devices 2>/dev/null | grep -q '^auto  picks: cuda' || log "WARNING: convoy finds no usable GPU; the GPU stages will fail or skip"

# --- 3b. the PJRT backend through JAX's CUDA plugin (pip install
# jax-cuda13-pjrt), last in a full check so that it never takes time from the stages above
# (--pjrt-only runs it alone):
# the PJRT parity tests with the GPU plugin standing in for the CPU one
# (CONVOY_PJRT_PLUGIN; replica tests needing more GPUs than there are skip),
# then 3 epochs of the seed CNN on it. The tests get at most 60% of the
# stage's time, so a hang or a crash in them still leaves the training run
# its turn. Skips, saying why, without the plugin or a build with the PJRT
# backend.
pjrt_gpu() {
  if [[ -z "$pjrt_plugin" ]]; then echo "skip: no JAX CUDA plugin (pip install jax-cuda13-pjrt)"; return 0; fi
  if "$convoy" devices | grep -q 'built without the PJRT C API header'; then
    echo "skip: this convoy was built without the PJRT backend (no pjrt_c_api.h found: pip install tensorflow-cpu)"
    return 0
  fi
  local rc=0  # a failing test must not keep the training run from reporting
  NVIDIA_TF32_OVERRIDE=0 CONVOY_PJRT_PLUGIN="$pjrt_plugin" timeout --kill-after=5 $((${stage_limit:-300} * 6 / 10)) \
    "$tests_bin" --gtest_filter='Pjrt*' --gtest_color=no >"$work/pjrt_gtest.log" 2>&1 || rc=$?
  ((rc != 124 && rc != 137)) || echo "the PJRT tests ran out of their time (timeout); the training run goes on"
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|^\[  PASSED  \]' "$work/pjrt_gtest.log" || tail -20 "$work/pjrt_gtest.log"
  "$convoy" train --device "pjrt:$pjrt_plugin" --data "$data" --epochs 3 --progress lines | tee "$work/pjrt_gpu.log" || rc=$?
  return $rc
}
if ((pjrt_only)); then
  stage pjrt_gpu 300 pjrt_gpu || true
  log "stages: build=${stage_status[build]:-not run} pjrt_gpu=${stage_status[pjrt_gpu]:-not run}(${stage_seconds[pjrt_gpu]:--}s)"
  return 0
fi

# --- 2. the GPU tests (TF32 off in the tests themselves; the variable also
# keeps any library's TF32 default out of the comparison)
# With $OUT set, gtest's XML report (every test's result and time) goes there too.
# Two stages, so the slow end-to-end tests (five EfficientNets with cuDNN's
# algorithm search) cannot eat the per-layer checks' time; a failing test
# never stops the script: each stage runs everything it has and reports.
slow_tests='CudaTraining.EfficientNets*:CudaSupport.EveryZooModel*'
run_tests() {  # run_tests NAME FILTER
  local xml=() rc=0
  [[ -n "$out" ]] && xml=(--gtest_output="xml:$out/gtest_$1.xml")
  NVIDIA_TF32_OVERRIDE=0 "$tests_bin" --gtest_filter="$2" --gtest_color=no "${xml[@]}" >"$work/gtest_$1.log" 2>&1 || rc=$?
  cat "$work/gtest_$1.log" >>"$work/gtest.log"
  grep -E '^\[ +(FAILED|SKIPPED) +\]|^\[  PASSED  \]' "$work/gtest_$1.log" || tail -20 "$work/gtest_$1.log"
  return $rc
}
fallback_check() { bash "$root/tests/cuda_fallback.sh" "$convoy"; }
stage gpu_tests 180 run_tests fast "Cuda*:StepsPerExecution*:Nccl*:-$slow_tests" || true
stage gpu_tests_slow 240 run_tests slow "$slow_tests" || true
stage cuda_fallback 30 fallback_check || true

# --- 2b. the nccl strategy with 2 replicas (2 GPUs; skips at once otherwise)
nccl_replicas() {
  local rc=0
  bash "$root/tests/nccl_replicas.sh" "$convoy" "$nccl_tests_bin" "$data" | tee "$work/nccl.log" || rc=$?
  ((rc == 77)) && return 0  # skipped: the log says why
  return $rc
}
stage nccl_replicas 180 nccl_replicas || true
if ((nccl_only)); then
  log "stages: build=${stage_status[build]:-not run} gpu_tests=${stage_status[gpu_tests]:-not run}(${stage_seconds[gpu_tests]:--}s) gpu_tests_slow=${stage_status[gpu_tests_slow]:-not run}(${stage_seconds[gpu_tests_slow]:--}s) nccl_replicas=${stage_status[nccl_replicas]:-not run}(${stage_seconds[nccl_replicas]:--}s)"
  grep -E '^\[ +(OK|FAILED|SKIPPED) +\] Nccl.* \(' "$work/gtest.log" 2>/dev/null || true
  log "NCCL: $(grep -E '^(skip:|4 passed|FAIL)' "$work/nccl.log" 2>/dev/null | head -1 || echo 'no result')"
  return 0
fi

# --- 3. the benchmark: the run as a user starts it (no --out: writing
# checkpoints every epoch is not training), then 5 epochs with --out for
# summary.json (input_wait_fraction) and the reports.
convoy_bench() {
  "$convoy" train --config "$root/bench/gpu_seed_cnn.yaml" --data "$data" | tee "$work/convoy.log"
}
convoy_outputs() {
  "$convoy" train --config "$root/bench/gpu_seed_cnn.yaml" --data "$data" --epochs 5 --out "$work/run"
}
t0=$(now)
stage convoy_50_epochs 120 convoy_bench || true
convoy_wall=$(since "$t0")
stage convoy_5_epochs_with_outputs 60 convoy_outputs || true
if [[ -n "$out" && -e "$work/run/summary.json" ]]; then cp "$work/run/summary.json" "$out/convoy_summary.json"; fi

torch_bench() {  # torch_bench MODE
  python3 "$root/bench/gpu_seed_cnn_torch.py" --mode "$1" --data "$data" --epochs 50 >"$work/torch_$1.json"
  cat "$work/torch_$1.json"
}
stage torch_eager 150 torch_bench eager || true
stage torch_compile 200 torch_bench compile || true
if [[ -n "$out" ]]; then cp "$work"/torch_*.json "$out/" 2>/dev/null || true; fi

stage pjrt_gpu 150 pjrt_gpu || true

# --- 4. the table
log "stages: $(for s in build gpu_tests gpu_tests_slow cuda_fallback nccl_replicas convoy_50_epochs convoy_5_epochs_with_outputs torch_eager torch_compile pjrt_gpu; do
  printf '%s=%s(%ss) ' "$s" "${stage_status[$s]:-not run}" "${stage_seconds[$s]:--}"; done)"
python3 - "$work" "$convoy_wall" "$("$convoy" devices 2>/dev/null | grep '^cuda:0' | head -1)" <<'EOF'
import json, os, re, sys
work, convoy_wall, gpu = sys.argv[1], float(sys.argv[2]), sys.argv[3] or "no GPU found"

try:  # gtest's own summary lines
    g = open(os.path.join(work, "gtest.log")).read()
    count = lambda word: sum(int(n) for n in re.findall(r"^\[  %s  ?\] (\d+) tests?" % word, g, re.M))
    tests = f"{count('PASSED')} passed, {count('FAILED')} failed, {count('SKIPPED')} skipped"
    nccl_one = {w: len(re.findall(r"^\[ +%s +\] Nccl\w*\.\w+ \(" % w, g, re.M)) for w in ("OK", "FAILED", "SKIPPED")}
    nccl_one = f"{nccl_one['OK']} passed, {nccl_one['FAILED']} failed, {nccl_one['SKIPPED']} skipped"
except OSError:
    tests = nccl_one = "not run"
try:  # tests/nccl_replicas.sh: "skip: why", "FAIL: what" or "4 passed, 0 failed"
    lines = open(os.path.join(work, "nccl.log")).read().splitlines()
    nccl_two = next((l for l in lines if re.match(r"^(skip:|FAIL:|\d+ passed)", l)), "no result")
except OSError:
    nccl_two = "not run"

def load(path):  # a JSON file, or a log whose last line is one
    try:
        with open(path) as f:
            text = f.read().strip()
        try:
            return json.loads(text)
        except ValueError:
            return json.loads(text.splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None

rows = []
c = None
try:  # convoy's own lines: "epoch ... 0.12 s ... img/s" and "total training time ..."
    text = open(os.path.join(work, "convoy.log")).read()
    epochs = [float(m) for m in re.findall(r"^epoch +\d+/\d+ .* ([0-9.]+) s +[0-9]+ img/s$", text, re.M)]
    total = re.search(r"total training time ([0-9.]+) s \| test accuracy ([0-9.]+)% \| ([0-9]+) images/s", text)
    if total and epochs:
        c = {"total_train_seconds": float(total.group(1)), "test_accuracy": float(total.group(2)) / 100,
             "images_per_second": float(total.group(3)), "epoch_seconds": epochs}
except OSError:
    pass
summary = load(os.path.join(work, "run", "summary.json"))
if c:
    wait = f"input wait {100 * summary['input_wait_fraction']:.1f}% (5-epoch run)" if summary else ""
    rows.append(("convoy (CUDA graphs, 32 steps each)", convoy_wall, c["total_train_seconds"],
                 sorted(c["epoch_seconds"])[len(c["epoch_seconds"]) // 2], c["images_per_second"],
                 c["test_accuracy"], wait))
peers = {}
for mode, label in (("eager", "PyTorch eager"), ("compile", "torch.compile")):
    t = load(os.path.join(work, f"torch_{mode}.json"))
    if t and "skipped" not in t:
        peers[mode] = t
        note = f"first epoch {t['epoch_seconds'][0]:.1f} s" if mode == "compile" else t["torch"]
        rows.append((label, t["wall_seconds"], t["total_train_seconds"], t["median_epoch_seconds_after_first"],
                     t["images_per_second"], t["test_accuracy"], note))
    elif t:
        rows.append((label + " (skipped)", None, None, None, None, None, t["skipped"]))

fmt = lambda v, f: "-" if v is None else f.format(v)
print()
print(f"GPU: {gpu}")
print(f"GPU tests (Cuda*, StepsPerExecution*, Nccl*): {tests}")
print(f"NCCL, one replica (tests/test_nccl.cpp): {nccl_one}")
print(f"NCCL, 2 replicas (tests/nccl_replicas.sh): {nccl_two}")
print("| run | end to end s | fit s (train + eval) | median epoch s | train images/s | test accuracy | note |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r[0]} | {fmt(r[1], '{:.1f}')} | {fmt(r[2], '{:.1f}')} | {fmt(r[3], '{:.3f}')} | "
          f"{fmt(r[4], '{:,.0f}')} | {fmt(r[5] and 100 * r[5], '{:.2f}%')} | {r[6]} |")
if c:
    speed = ""
    if "eager" in peers:
        speed = f", {peers['eager']['total_train_seconds'] / c['total_train_seconds']:.1f}x PyTorch eager (target >= 3x)"
    if "compile" in peers:
        speed += f", {peers['compile']['total_train_seconds'] / c['total_train_seconds']:.1f}x torch.compile"
    print(f"HEADLINE: convoy trains the seed CNN for 50 epochs in {convoy_wall:.1f} s end to end "
          f"(target < 10 s; fit {c['total_train_seconds']:.1f} s), test accuracy {100 * c['test_accuracy']:.2f}% "
          f"(target >= 89%){speed}")
else:
    print("HEADLINE: the convoy benchmark did not finish; see the stage log above")
EOF
}

if [[ -n "$out" ]]; then
  mkdir -p "$out"
  main 2>&1 | tee "$out/gpu_check.txt"
else
  main
fi
