# Sourced by the test scripts: a small Fashion-MNIST (the first N images of
# each split, as raw IDX files) so that whole runs take a second or two.
#   make_small_fashion DIR TRAIN_COUNT TEST_COUNT
make_small_fashion() {
  local dir="$1" train="$2" test="$3" src=/usr/share/datasets/fashion-mnist
  mkdir -p "$dir"
  _idx_header() {  # magic for u8 with RANK dimensions, then each as 4 bytes big-endian
    local rank="$1"; shift
    printf "\\x00\\x00\\x08\\x$(printf %02x "$rank")"
    local d
    for d in "$@"; do printf "\\x$(printf %02x $((d >> 24 & 255)))\\x$(printf %02x $((d >> 16 & 255)))\\x$(printf %02x $((d >> 8 & 255)))\\x$(printf %02x $((d & 255)))"; done
  }
  local split count
  for split in train t10k; do
    count=$train; [[ $split == t10k ]] && count=$test
    { _idx_header 3 "$count" 28 28; zcat "$src/$split-images-idx3-ubyte.gz" | tail -c +17 | head -c $((count * 784)); } \
      >"$dir/$split-images-idx3-ubyte"
    { _idx_header 1 "$count"; zcat "$src/$split-labels-idx1-ubyte.gz" | tail -c +9 | head -c "$count"; } \
      >"$dir/$split-labels-idx1-ubyte"
  done
}
