#!/usr/bin/env bash
# The test run CI uses: set up, then
#   1. release build: unit, kernel and golden tests, the model tests on the real SmolLM2, and the
#      end-to-end server tests (the real `tessera serve` driven by the openai Python client);
#   2. scalar-only build (TESSERA_FORCE_SCALAR): unit and kernel tests, so the fallback never rots;
#   3. ASan + UBSan build: unit tests, then the server e2e subset on hostile input (label
#      e2e_sanitized, tests/e2e/CMakeLists.txt): any sanitizer report in the server fails it;
#   4. the GGUF, grammar, chat-template and agent-API fuzzers, a few seconds each (clang libFuzzer).
# TESSERA_TEST_QUICK=1 runs step 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

scripts/setup.sh release
ctest --test-dir build/release --output-on-failure -j"$jobs" -L 'unit|kernel|golden|model|e2e'

if [ "${TESSERA_TEST_QUICK:-0}" = "1" ]; then exit 0; fi

# Builds only the test programs carrying the given label (a test's name is its target's name).
build_label() {
  local dir=$1 label=$2
  local targets
  # (a test that is a script, like check_layering, has no program to build)
  targets=$(comm -12 <(ctest --test-dir "$dir" -L "$label" -N | awk '/Test +#/{print $3}' | sort) \
                     <(cmake --build "$dir" --target help | sed -n 's/^\([A-Za-z0-9_.-]*\): .*/\1/p' | sort))
  # shellcheck disable=SC2086
  cmake --build "$dir" -j"$jobs" --target $targets
}

cmake --preset scalar >/dev/null
build_label build/scalar 'kernel|unit'
ctest --test-dir build/scalar --output-on-failure -j"$jobs" -L 'kernel|unit'

cmake --preset asan >/dev/null
build_label build/asan 'unit'
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build/asan --output-on-failure -j"$jobs" -L 'unit'
cmake --build build/asan -j"$jobs" --target tessera
ctest --test-dir build/asan --output-on-failure -L 'e2e_sanitized'  # sets its own ASAN/UBSAN_OPTIONS

if [ -f fuzz/CMakeLists.txt ]; then
  cmake --preset fuzz >/dev/null && cmake --build build/fuzz -j"$jobs" --target fuzz_gguf fuzz_grammar fuzz_jinja fuzz_agent_apis
  for f in build/fuzz/fuzz/fuzz_*; do
    [ -x "$f" ] || continue
    echo "fuzz smoke: $f"
    # New inputs go to a scratch corpus; the committed seeds in fuzz/corpus are only read.
    tmp_corpus=$(mktemp -d)
    "$f" -max_total_time=10 -rss_limit_mb=2048 -artifact_prefix=build/fuzz/ "$tmp_corpus" fuzz/corpus/ 2>&1 | tail -20
    rm -rf "$tmp_corpus"
  done
fi
echo "all test stages passed"
