#!/usr/bin/env bash
# Issue 25's real-file table in one invocation: for each GGUF (default: Qwen2.5-Coder-0.5B and
# Gemma-3-270M, both Q4_K_M), B1/B2 (bench_llama_cpp.py: decode after 16 and 2,048 tokens, prefill
# 128/512/2,048, with the probe_bandwidth / probe_compute limits) and B4 (bench_batched_decode:
# aggregate decode at 1/4/16/32 sequences), each side by side with llama.cpp, round by round.
# Prints the host's ISA line and load first; each section's output goes to stdout as it comes.
# The peer, llama-cpp-python 0.3.36 (llama.cpp of 2026-10), is built from its sdist with
# GGML_NATIVE (about 8 minutes on 2 cores) when this Python does not have it yet.
#
#   bench/bench_real_files.sh [build dir=build/release] [rounds=3] [B4 output tokens=128] [models...]
set -euo pipefail
build=${1:-build/release}
rounds=${2:-3}
out_len=${3:-128}
shift $(( $# < 3 ? $# : 3 ))
models=("$@")
if [ ${#models[@]} -eq 0 ]; then
  models=(models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf models/gemma-3-270m-q4_k_m.gguf)
fi
if ! python3 -c 'import llama_cpp, sys; sys.exit(llama_cpp.__version__ != "0.3.36")' 2>/dev/null; then
  echo "installing llama-cpp-python 0.3.36 (the peer) ..."
  CMAKE_ARGS="-DGGML_NATIVE=ON" python3 -m pip install --quiet --no-cache-dir llama-cpp-python==0.3.36 \
    || CMAKE_ARGS="-DGGML_NATIVE=ON" python3 -m pip install --quiet --no-cache-dir --break-system-packages \
         llama-cpp-python==0.3.36
fi
isa=$(grep -o -w -E 'avx512f|avx512_vnni|avx2|amx_tile|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cpus, isa: ${isa}"
echo "commit: $(git rev-parse --short HEAD), start $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
# Progress: "[k/N]" on each part (N = 2 per model), and each part prints a line per round.
step=0; steps=$(( ${#models[@]} * 2 ))
for model in "${models[@]}"; do
  step=$((step + 1))
  echo; echo "=== [${step}/${steps}] $(date -u +%T) ${model}: B1/B2 (bench_llama_cpp.py, ${rounds} rounds)"
  python3 bench/bench_llama_cpp.py --tessera "${build}/src/cli/tessera" --model "${model}" --threads 2 \
    --rounds "${rounds}" --probe-dir "${build}/bench"
  echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
  step=$((step + 1))
  echo; echo "=== [${step}/${steps}] $(date -u +%T) ${model}: B4 (bench_batched_decode, 128 in / ${out_len} out, ${rounds} rounds)"
  "${build}/bench/bench_batched_decode" --model "${model}" --rounds "${rounds}" --threads 2 \
    --batches 1,4,16,32 --output-len "${out_len}"
  echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo; echo "end $(date -u +%FT%TZ)"
