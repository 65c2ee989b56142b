"""tessera's LoRA forward against llama.cpp's (tests/data/lora_llamacpp_greedy.json, written by
scripts/gen_lora_goldens.py with `llama-server --lora` and per-request adapter scales): the same
seeded adapters (rebuilt here by scripts/make_lora_gguf.py; the sha256 proves they are the same
bytes), the same prompt ids, greedy to EOS (at most 32 tokens) with `tessera run --lora`. The paths must agree token
for token, and may part only at a position where llama.cpp's own top-2 logit gap is below the
near-tie gap (another, equally valid rounding may pick the other token there); parting elsewhere,
or an adapter that does not change the base model's path, fails.
"""
import hashlib
import json
import os
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR, model_path, tessera_bin

pytest.importorskip("gguf")
GOLDEN = os.path.join(SOURCE_DIR, "tests", "data", "lora_llamacpp_greedy.json")


@pytest.fixture(scope="module")
def golden_adapters(tmp_path_factory):
    if tessera_bin() is None or model_path() is None:
        pytest.skip("no tessera binary or default model")
    doc = json.load(open(GOLDEN))
    out = tmp_path_factory.mktemp("lora_golden")
    paths = {}
    for name, spec in doc["adapters"].items():
        path = str(out / f"{name}.gguf")
        subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "make_lora_gguf.py"), "--base", model_path(),
                        "--out", path, *spec["make_lora_gguf_args"]], check=True)
        with open(path, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == spec["sha256"], f"{name}: not the golden's adapter bytes"
        paths[name] = path
    return doc, paths


def tessera_greedy(prompt_ids, n, lora):
    args = [tessera_bin(), "run", "--model", model_path(), "--prompt-ids", ",".join(map(str, prompt_ids)), "-n", str(n),
            "--temperature", "0", "--json"]
    if lora:
        args += ["--lora", lora]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["ids"]


def test_greedy_matches_llama_server_lora(golden_adapters):
    doc, paths = golden_adapters
    gap = doc["near_tie_gap"]
    agreed, total = 0, 0
    base_paths = {}
    for case in doc["cases"]:
        want = case["greedy_ids"]
        got = tessera_greedy(case["prompt_ids"], len(want), paths.get(case["adapter"]))
        # SmolLM2's end-of-generation ids (<|endoftext|>, <|im_end|>): an engine may or may not list the
        # stop token it ended on.
        got = got[:-1] if got and got[-1] in (0, 2) else got
        want = want[:-1] if want and want[-1] in (0, 2) else want
        part = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        if part == min(len(got), len(want)) and len(got) != len(want):
            assert case["top2_gaps"][part] < gap, f"{case['adapter']}: one engine stopped at {part}, the other did not"
        where = f"adapter '{case['adapter']}', prompt {case['text'][:30]!r}"
        if part < min(len(got), len(want)):
            assert case["top2_gaps"][part] < gap, (
                f"{where}: parts from llama.cpp at token {part} where llama.cpp's top-2 gap is "
                f"{case['top2_gaps'][part]} (>= {gap}): tessera {got[part]}, llama.cpp {want[part]}")
        agreed += part
        total += len(want)
        if case["adapter"] == "":
            base_paths[case["text"]] = want
        elif case["num_decisive"] > 0:
            # The adapter moved llama.cpp's path off the base model's, and tessera's with it.
            assert want != base_paths[case["text"]], where
    print(f"tokens agreeing before a parting: {agreed} of {total}")
    assert agreed >= total // 2
