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
# Known upward includes, each to be cut (issue 20 item 5: checkpoints and
# KerasModel's files carry the CLI's RunConfig). A line here that no longer
# happens fails too, so the list only shrinks.
known=(
  "include/convoy/train/checkpoint.h convoy/config/run_config.h"
  "src/train/checkpoint.cpp config/transfer.h"
  "src/train/keras_model_files.cpp config/float_text.h"
  "src/train/keras_model_files.cpp config/layer_config.h"
)

check() {
  local root=$1 bad=0 file part line target to seen=()
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
      if printf '%s\n' "${known[@]}" | grep -qxF "$file $target"; then seen+=("$file $target"); continue; fi
      echo "$file: $part includes $target, but $part may use only: ${may_use[$part]:-nothing}"
      bad=1
    done < <(grep -E '^#include "' "$root/$file" || true)
  done < <(cd "$root" && find src include/convoy -mindepth 2 -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) \
             | sort)
  for k in "${known[@]}"; do
    if ! printf '%s\n' "${seen[@]}" | grep -qxF "$k"; then
      echo "tests/include_layers.sh: '$k' is listed as a known upward include but no longer happens; remove it from the list"
      bad=1
    fi
  done
  return $bad
}

if [[ ${1:-} == --selftest ]]; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src/io" "$tmp/src/train" "$tmp/include/convoy/train"
  printf '#include "convoy/core/error.h"\n' >"$tmp/src/io/ok.cpp"
  for k in "${known[@]}"; do mkdir -p "$tmp/$(dirname "${k% *}")"; printf '#include "%s"\n' "${k#* }" >>"$tmp/${k% *}"; done
  check "$tmp" >/dev/null || { echo "selftest: a clean tree failed"; exit 1; }
  printf '#include "convoy/train/fit.h"\n' >"$tmp/src/io/bad.cpp"
  out=$(check "$tmp") && { echo "selftest: io including train passed"; exit 1; }
  grep -q "src/io/bad.cpp: io includes convoy/train/fit.h" <<<"$out" || { echo "selftest: wrong message: $out"; exit 1; }
  echo "selftest: passed"
  exit 0
fi
check "${1:?usage: include_layers.sh SOURCE_DIR | --selftest}" && echo "include layers: every part includes only the parts below it"
