#!/usr/bin/env bash
# Prepares a GPU check on a machine without a GPU, for a GPU machine that has
# CUDA but not convoy's other build dependencies (oneDNN, cairo, yaml-cpp...):
# builds convoy and convoy_tests (Release, CUDA backend, portable x86-64-v3
# code) and writes into .gpu/ (ignored by git):
#   .gpu/bundle.tar.xz  bin/{convoy,convoy_tests} and lib/: every shared
#                       library they load, except glibc, libstdc++/libgcc and
#                       CUDA's own (cuDNN, cuBLAS: the GPU machine's are used;
#                       NCCL is loaded at run time, also from the GPU machine).
#                       Built without MPI: no nccl strategy (its 2-GPU checks
#                       need a source build there, tests/nccl_replicas.sh);
#   .gpu/data/          the four Fashion-MNIST IDX files.
# Then, on the GPU machine, with .gpu carried along:
#   bash bench/gpu_check.sh            (tries to build; falls back to .gpu/bundle.tar.xz)
#
#   bash bench/gpu_bundle.sh [--build-dir DIR] [--jobs N] [--data DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-gpu-bundle
jobs=2
data=/usr/share/datasets/fashion-mnist
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    *) echo "gpu_bundle: unknown argument $1" >&2; exit 2 ;;
  esac
done

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCONVOY_CUDA=ON -DCONVOY_NATIVE=OFF -DCONVOY_MPI=OFF \
  -DCMAKE_CXX_FLAGS=-march=x86-64-v3 -DCMAKE_CUDA_ARCHITECTURES=90 "${launcher[@]}"
nice cmake --build "$build" -j "$jobs" --target convoy convoy_tests

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" .gpu/data
cp "$build/convoy" "$build/tests/convoy_tests" "$stage/bin/"
strip "$stage/bin/"*
# Every library the loader resolves, except the ones any Linux (glibc, the
# GCC runtime) and any CUDA machine (the driver, cuDNN, cuBLAS) brings.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|librt\.|libgcc_s|libstdc\+\+|libcuda\.|libcudnn|libcublas|libnccl)'
for b in "$stage/bin/"*; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $skip ]] || cp -L "$path" "$stage/lib/$name"
done
tar -C "$stage" -cJf .gpu/bundle.tar.xz bin lib
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  cp "$data/$f.gz" .gpu/data/ 2>/dev/null || cp "$data/$f" .gpu/data/
done
echo "bundle: $(du -h .gpu/bundle.tar.xz | cut -f1) with $(ls "$stage/lib" | wc -l) libraries; data: $(du -sh .gpu/data | cut -f1)"
echo "carry .gpu to the GPU machine and run: bash bench/gpu_check.sh"
