#!/usr/bin/env bash
# The README's library code, built and run as a user outside this tree would:
# installed with `cmake --install` into a temporary prefix, then built twice,
# as an outside CMake project (find_package(convoy), convoy::convoy) and with
# pkg-config (g++ ... $(pkg-config --cflags --libs convoy)), and each program
# run. Any snippet that does not compile, link or run fails the test.
#
#   tests/readme_snippets.sh README.md BUILD_DIR
#
# What is taken from README.md: every ```cpp block of the `## Library`
# section, in order. The rule for turning one into a program:
#   - a block with `int main(` is compiled exactly as written;
#   - any other block is a piece of such a main (as the README says): its
#     own #include and `using` lines, after those of the first complete
#     block, go at file scope and its other lines inside `int main() { }`.
# The only change to the README's code: every `.epochs = N` becomes
# `.epochs = 1` (printed per block).
# The prelude, for pieces that use `train`, `val` or `test` without
# defining them (the Keras snippet): stand-in data::LabeledImages of random
# images shaped as that snippet's model takes them, [3, 64, 64], with 4
# classes (64 training, 32 validation, 32 test examples). It checks that the
# code builds and runs, not what it learns. Fashion-MNIST (for the first
# block) is read from where setup.sh installs it.
#
# Also checked: the installed headers include only installed headers and
# compile with nothing but the prefix's include folder (no src/ or build-tree
# header), and `pkg-config --static` resolves.
# The programs run with OMP_WAIT_POLICY=passive unless it is set: under
# ctest -j on 2 cores, OpenMP's spinning threads otherwise take ~10x longer
# (docs/benchmarks.md, "on a shared machine").
set -euo pipefail

readme=$(realpath "$1")
rname=$(basename "$readme")
build=$(realpath "$2")
cmake=${CMAKE:-cmake}   # ctest passes the build's cmake and compiler
cxx=${CXX:-g++}
export CXX=$cxx        # the outside CMake project's compiler too
jobs=$(nproc 2>/dev/null || echo 2)
work=$(mktemp -d "${TMPDIR:-/tmp}/convoy-readme.XXXXXX")
if [[ -n ${CONVOY_README_KEEP:-} ]]; then  # keep the sources, builds and logs to look at
  echo "work folder: $work"
else
  trap 'rm -rf "$work"' EXIT
fi
prefix=$work/prefix
start=$SECONDS
step() { printf '[%3ds] %s\n' $((SECONDS - start)) "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

step "install $build into a temporary prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "cmake --install"; }
pc=$(find "$prefix" -name convoy.pc -path '*/pkgconfig/*' | head -n1)
[[ -n $pc ]] || fail "no convoy.pc under $prefix"
[[ -n $(find "$prefix" -name convoyConfig.cmake) ]] || fail "no convoyConfig.cmake under $prefix"
[[ -x $prefix/bin/convoy ]] || fail "no bin/convoy under $prefix"

step "the installed headers compile with only $prefix/include"
(cd "$prefix/include" && find convoy -name '*.h' | sort) >"$work/headers.txt"
[[ -s $work/headers.txt ]] || fail "no headers under $prefix/include/convoy"
# Every quoted include names an installed header (none from src/ or build/).
while read -r h; do
  for inc in $(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/p' "$prefix/include/$h"); do
    [[ -f $prefix/include/$inc ]] || fail "installed $h includes \"$inc\", which is not installed"
  done
done <"$work/headers.txt"
# And all of them together compile with nothing else on the include path.
sed 's/.*/#include "&"/' "$work/headers.txt" >"$work/all_headers.cpp"
"$cxx" -std=c++20 -fsyntax-only -I"$prefix/include" "$work/all_headers.cpp" 2>"$work/headers.log" ||
  { cat "$work/headers.log" >&2; fail "the installed headers do not compile for an outside user"; }
echo "  $(wc -l <"$work/headers.txt") headers"

step "extract the ## Library snippets from $rname"
# Writes snippet_<n>.txt and the README line each starts at (lines.txt).
awk -v dir="$work" '
  /^## / { inlib = ($0 ~ /^## Library[[:space:]]*$/) }
  inlib && /^```cpp[[:space:]]*$/ { n++; code = 1; print n, NR + 1 >> (dir "/lines.txt"); next }
  code && /^```/ { code = 0; next }
  code { print > (dir "/snippet_" n ".txt") }
' "$readme"
[[ -s $work/lines.txt ]] || fail "no \`\`\`cpp block under ## Library in $readme"

mkdir -p "$work/src"
head_lines=""   # the first complete block's #include and using lines
names=()
while read -r n line; do
  snip=$work/snippet_$n.txt
  out=$work/src/snippet_$n.cpp
  names+=("snippet_$n")
  epochs=$(grep -oE '\.epochs = [0-9]+' "$snip" | sed 's/.* //' | paste -sd, || true)
  if grep -qE '\bint[[:space:]]+main[[:space:]]*\(' "$snip"; then
    kind="complete program"
    sed -E 's/\.epochs = [0-9]+/.epochs = 1/g' "$snip" >"$out"
    [[ -n $head_lines ]] || head_lines=$(grep -E '^[[:space:]]*(#include|using[[:space:]])' "$snip" || true)
  else
    kind="piece of main"
    [[ -n $head_lines ]] || fail "$rname:$line: a piece of main before any complete program (its includes come from the first one)"
    own=$(grep -E '^[[:space:]]*(#include|using[[:space:]])' "$snip" || true)
    {
      echo "// $rname:$line, wrapped by tests/readme_snippets.sh"
      printf '%s\n%s\n' "$head_lines" "$own" | grep -E '^[[:space:]]*#include' | awk '!seen[$0]++'
      printf '%s\n%s\n' "$head_lines" "$own" | grep -E '^[[:space:]]*using[[:space:]]' | awk '!seen[$0]++'
      if grep -vE '^[[:space:]]*//' "$snip" | grep -qP '\b(train|val|test)\b(?!::)'; then
        cat <<'PRELUDE'
#include <cstdint>
#include <random>
// Prelude (tests/readme_snippets.sh): stand-in data for train, val, test.
static convoy::data::LabeledImages readme_stand_in(int64_t n, uint32_t seed) {
  convoy::data::LabeledImages d{convoy::Tensor(convoy::DType::f32, {n, 3, 64, 64}),
                                convoy::Tensor(convoy::DType::i32, {n})};
  std::mt19937 gen(seed);
  std::normal_distribution<float> pixel;
  for (float& v : d.images.data<float>()) v = pixel(gen);
  auto labels = d.labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(i % 4);
  return d;
}
int main() {
  const auto train = readme_stand_in(64, 1), val = readme_stand_in(32, 2), test = readme_stand_in(32, 3);
PRELUDE
      else
        echo "int main() {"
      fi
      grep -vE '^[[:space:]]*(#include|using[[:space:]])' "$snip" | sed -E 's/\.epochs = [0-9]+/.epochs = 1/g'
      echo "}"
    } >"$out"
  fi
  echo "  snippet_$n ($rname:$line): $kind${epochs:+; .epochs = $epochs -> 1}"
done <"$work/lines.txt"

step "build them as an outside CMake project (find_package(convoy))"
mkdir -p "$work/cmake-project"
{
  echo "cmake_minimum_required(VERSION 3.22)"
  echo "project(readme_snippets LANGUAGES CXX)"
  echo "find_package(convoy REQUIRED)"
  for name in "${names[@]}"; do
    echo "add_executable($name $work/src/$name.cpp)"
    echo "target_link_libraries($name PRIVATE convoy::convoy)"
  done
} >"$work/cmake-project/CMakeLists.txt"
"$cmake" -S "$work/cmake-project" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/cmake-configure.log" 2>&1 || { cat "$work/cmake-configure.log" >&2; fail "find_package(convoy) in an outside project"; }
"$cmake" --build "$work/cmake-build" -j "$jobs" >"$work/cmake-build.log" 2>&1 || true
for name in "${names[@]}"; do
  [[ -x $work/cmake-build/$name ]] || { cat "$work/cmake-build.log" >&2; echo "--- $name.cpp:" >&2; cat -n "$work/src/$name.cpp" >&2; fail "$name does not build with find_package(convoy)"; }
done

step "build them with pkg-config"
export PKG_CONFIG_PATH=$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
flags=$(pkg-config --cflags --libs convoy) || fail "pkg-config --cflags --libs convoy"
pkg-config --libs --static convoy >/dev/null || fail "pkg-config --libs --static convoy"
echo "  pkg-config --cflags --libs convoy: $flags"
mkdir -p "$work/pc-build"
for name in "${names[@]}"; do
  # shellcheck disable=SC2086  # the flags are words
  "$cxx" -std=c++20 "$work/src/$name.cpp" $flags -o "$work/pc-build/$name" >"$work/pc-$name.log" 2>&1 &
done
for name in "${names[@]}"; do
  wait -n || true
done
for name in "${names[@]}"; do
  [[ -x $work/pc-build/$name ]] || { cat "$work/pc-$name.log" >&2; fail "$name does not build with pkg-config"; }
done

export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
for how in cmake-build pc-build; do
  for name in "${names[@]}"; do
    step "run $how/$name"
    if ! (cd "$work" && timeout 300 "$work/$how/$name") >"$work/run-$how-$name.log" 2>&1; then
      tail -n 30 "$work/run-$how-$name.log" >&2
      fail "$how/$name exited non-zero"
    fi
    tail -n 2 "$work/run-$how-$name.log" | sed 's/^/  /'
  done
done
step "ok: ${#names[@]} snippets built both ways and ran"
