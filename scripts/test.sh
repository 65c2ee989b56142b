#!/usr/bin/env bash
# The test run CI uses (.ci/run): set up, then
#   1. release build: unit, kernel and golden tests, the model tests on the real SmolLM2, Qwen and
#      Gemma files, and the end-to-end server tests (the real `tessera serve` driven by the openai
#      Python client and the agent SDKs);
#   2. scalar-only build (TESSERA_FORCE_SCALAR): unit and kernel tests, so the fallback never rots;
#   3. ASan + UBSan build: the unit tests and the `sanitized` label (tessera_add_test SANITIZED: the
#      engine's equivalence, features, grammar and speculation tests (not the speculation
#      statistics: too slow under ASan), the stories golden, and every kernel test at each ISA level the host has,
#      the attention program without its two largest sweeps: tests/kernels/CMakeLists.txt),
#      then the server e2e subset on hostile input (label e2e_sanitized, tests/e2e/CMakeLists.txt):
#      any sanitizer report fails it;
#   4. the GGUF, grammar, chat-template and agent-API fuzzers, a few seconds each (clang libFuzzer).
# Every stage prints how many tests ran, passed and were skipped (scripts/test_summary.py, from the
# gtest XML and pytest counts left in build/test-reports/<stage>) and fails if it ran none; the
# kernel stages print which kernel paths this host ran (tests/kernels/kernel_paths.cpp).
# With CI=true (or TESSERA_NO_SKIP=1 already set) every skip is a failure, but a skip for an ISA the
# host lacks (tests/common/isa_skip.h, ALLOWED_SKIPS in tests/e2e/conftest.py): a missing model or
# package must turn the run red, not quietly shrink it. .ci/run sets TESSERA_NO_SKIP=1.
# TESSERA_TEST_QUICK=1 runs step 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
if [ "${CI:-}" = "true" ]; then export TESSERA_NO_SKIP=1; fi
echo "test.sh: TESSERA_NO_SKIP=${TESSERA_NO_SKIP:-0} (1: a skip fails the run, but an absent ISA's)"

reports=build/test-reports
rm -rf "$reports"

# run_stage NAME BUILD_DIR LABEL_REGEX KINDS [ctest args...]: the stage's tests through ctest, each
# gtest program and pytest run leaving its counts in $reports/NAME; then the stage's summary, which
# fails when nothing ran, or nothing of one of KINDS ("gtest", "pytest", "gtest pytest").
run_stage() {
  local name=$1 dir=$2 labels=$3 kinds=$4
  shift 4
  local out="$PWD/$reports/$name" start=$SECONDS status=0
  mkdir -p "$out"
  GTEST_OUTPUT="xml:$out/" TESSERA_TEST_COUNTS_DIR="$out" \
    ctest --test-dir "$dir" --output-on-failure --output-junit "$out/ctest.xml" -L "$labels" "$@" || status=$?
  # shellcheck disable=SC2086
  python3 scripts/test_summary.py "$name" "$out" $kinds || status=1
  echo "[stage $name] $((SECONDS - start)) s$([ "$status" = 0 ] || echo ": FAILED")"
  return "$status"
}

# kernel_paths BUILD_DIR: which kernel paths (ISA levels, VNNI, AMX) this build ran on this host.
kernel_paths() {
  cmake --build "$1" --target kernel_paths >/dev/null
  echo "[$1] $("$1/tests/kernels/kernel_paths")"
}

scripts/setup.sh release
run_stage release build/release 'unit|kernel|golden|model|e2e' 'gtest pytest' -j"$jobs"
kernel_paths build/release

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
run_stage scalar build/scalar 'kernel|unit' gtest -j"$jobs"
kernel_paths build/scalar

cmake --preset asan >/dev/null
# test_engine_spec and test_engine_spec_stats run `tessera quantize`: the binary comes first.
cmake --build build/asan -j"$jobs" --target tessera
# (anchored: ctest -L takes a regular expression, and a bare 'sanitized' matches e2e_sanitized too)
build_label build/asan '^(unit|sanitized)$'
ASAN_OPTIONS=detect_leaks=1 run_stage asan build/asan '^(unit|sanitized)$' gtest -j"$jobs"
kernel_paths build/asan
run_stage asan_e2e build/asan 'e2e_sanitized' pytest  # sets its own ASAN/UBSAN_OPTIONS

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
