#!/usr/bin/env bash
# The main job: set up (idempotent), then generate with the default model (SmolLM2-135M-Instruct).
#   scripts/run.sh [tessera run flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh release >/dev/null
if [ $# -eq 0 ]; then
  exec build/release/src/cli/tessera run
fi
exec build/release/src/cli/tessera run "$@"
