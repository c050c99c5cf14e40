#!/usr/bin/env bash
# The parts' layering (docs/architecture.md): a file of part P (src/P/ or
# include/convoy/P/) includes only its own part and the parts P may use below.
# Usage: include_layers.sh SOURCE_DIR   (exit 1, naming each offending line)
#        include_layers.sh --selftest   (a planted upward include must fail)
set -euo pipefail

# Which parts each part may include. A part missing here is a new folder:
# add it, with what it may use, when it joins the layout.
declare -A may_use=(
  [core]=""
  [nn]="core"
  [optim]="core"
  [data]="core"
  [image]="core data"
  [io]="core nn"
  [records]="core data image io"
  [backends]="core nn optim"
  [dist]="core data backends"
  [train]="core nn optim data image io backends dist"
  [report]="core data io train"
  [config]="core nn optim data image records backends train"
  [app]="core nn optim data image io records backends dist train report config"
  [cli]="core nn optim data image io records backends dist train report config app"
)

check() {
  local root=$1 bad=0 file part line target to
  while IFS= read -r file; do
    part=${file#src/}; part=${part#include/convoy/}; part=${part%%/*}
    if [[ ! -v may_use[$part] ]]; then
      echo "$file: part '$part' is not in tests/include_layers.sh's table; add it with the parts it may use"
      bad=1; continue
    fi
    while IFS= read -r line; do
      target=$(sed -E 's/^#include "([^"]*)".*/\1/' <<<"$line")
      to=${target#convoy/}; to=${to%%/*}
      [[ $to == "$target" || $to == "$part" || ! -v may_use[$to] ]] && continue  # same folder, own part, or not a part (xla/...)
      [[ " ${may_use[$part]} " == *" $to "* ]] && continue
      echo "$file: $part includes $target, but $part may use only: ${may_use[$part]:-nothing}"
      bad=1
    done < <(grep -E '^#include "' "$root/$file" || true)
  done < <(cd "$root" && find src include/convoy -mindepth 2 -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) \
             | sort)
  return $bad
}

if [[ ${1:-} == --selftest ]]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src/io" "$tmp/src/train" "$tmp/include/convoy/train"
  printf '#include "convoy/core/error.h"\n' >"$tmp/src/io/ok.cpp"
  printf '#include "convoy/io/safetensors.h"\n#include "xla/pjrt_c_api.h"\n' >"$tmp/src/train/ok.cpp"
  check "$tmp" >/dev/null || { echo "selftest: a clean tree failed"; exit 1; }
  printf '#include "convoy/train/fit.h"\n' >"$tmp/src/io/bad.cpp"
  out=$(check "$tmp") && { echo "selftest: io including train passed"; exit 1; }
  grep -q "src/io/bad.cpp: io includes convoy/train/fit.h" <<<"$out" || { echo "selftest: wrong message: $out"; exit 1; }
  # What checkpoints and KerasModel's files once did (issue 20 item 5): the
  # training library reading the run config above it, public or private header.
  rm "$tmp/src/io/bad.cpp"
  printf '#include "convoy/config/run_config.h"\n' >"$tmp/include/convoy/train/bad.h"
  printf '#include "config/transfer.h"\n' >"$tmp/src/train/bad.cpp"
  out=$(check "$tmp") && { echo "selftest: train including config passed"; exit 1; }
  grep -q "include/convoy/train/bad.h: train includes convoy/config/run_config.h" <<<"$out" &&
    grep -q "src/train/bad.cpp: train includes config/transfer.h" <<<"$out" || { echo "selftest: wrong message: $out"; exit 1; }
  echo "selftest: passed"
  exit 0
fi
check "${1:?usage: include_layers.sh SOURCE_DIR | --selftest}" && echo "include layers: every part includes only the parts below it"
