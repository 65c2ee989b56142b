#!/usr/bin/env bash
# The main job: set up (idempotent), then generate with the default model (SmolLM2-135M-Instruct).
#   scripts/run.sh [tessera run flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
# Only the binary: the tests and benchmarks are built by scripts/test.sh.
# Set-up progress (installs, the build's [n/N] lines) goes to stderr: stdout is the answer alone.
TESSERA_SETUP_TESTS=0 TESSERA_BUILD_TARGETS=tessera scripts/setup.sh release 1>&2
if [ $# -eq 0 ]; then
  exec build/release/src/cli/tessera run
fi
exec build/release/src/cli/tessera run "$@"
