#!/usr/bin/env bash
# The public library as a program outside this tree sees it (issue 41): install the release build
# into a scratch prefix, build examples/ against that prefix only (CMake's find_package and, the
# second way, pkg-config), and run the program on the default model. Fails on a public header that
# includes an internal one, a symbol libtessera does not carry, or a package file that is wrong.
#   scripts/check_installed_package.sh BUILD_DIR MODEL.gguf      (ctest runs it: example_installed_package)
set -euo pipefail
build=$(cd "$1" && pwd)
model=$2
src=$(cd "$(dirname "$0")/.." && pwd)
work="$build/package_check"
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
# Nothing of the source tree on the include path: only the prefix.
[ ! -e "$work/prefix/include/util" ] && [ -f "$work/prefix/include/tessera/engine.h" ]
cmake -S "$src/examples" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake" >/dev/null
pc_dir=$(dirname "$(find "$work/prefix" -name tessera.pc | head -n 1)")
# shellcheck disable=SC2046
c++ -O1 -o "$work/stream_two_pkgconfig" "$src/examples/stream_two.cpp" \
  $(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs tessera)
for program in "$work/cmake/stream_two" "$work/stream_two_pkgconfig"; do
  out=$("$program" "$model" 12)
  echo "$out" | tail -n 4
  # Both requests finished, each with its 12 greedy tokens (or an end of sequence before them).
  grep -q '^\[0\] finished' <<<"$out" && grep -q '^\[1\] finished' <<<"$out" || { echo "FAIL: $program" >&2; exit 1; }
done
# The two builds print the same (greedy) answers.
diff <("$work/cmake/stream_two" "$model" 12 | grep '^answer') <("$work/stream_two_pkgconfig" "$model" 12 | grep '^answer')
echo "installed package: find_package and pkg-config builds ran and agree"
