"""The two real K-quant GGUFs of scripts/fetch_models.sh (Gemma-3-270M and Qwen2.5-Coder-0.5B-Instruct,
Q4_K_M), driven as a user drives them: `tessera run --model FILE --chat ...` and `tessera serve
--model FILE` with /v1/chat/completions. Skipped when a file is absent.

Checked against llama.cpp's goldens (tests/data/*_greedy.json, scripts/gen_kquant_goldens.py; its
prompts for the chat cases are the model's chat template rendered by hand):
- the start-up lines name the architecture (and, for Gemma 3, its local/global KV layout);
- the model's own chat template turns the user message into exactly the ids llama.cpp was fed;
- the greedy continuation (64 tokens, past EOS) equals llama.cpp's token for token up to the first
  difference, and that difference sits on a near-tie of llama.cpp's own logits (top-2 gap < 0.5),
  the criterion of tests/model/test_kquant_golden.cpp, here through the CLI and the HTTP server;
- the server, with the three chat requests sent at once (one batch), gives what `run` gives alone.
"""
import concurrent.futures
import json
import os
import subprocess

import pytest

from conftest import SOURCE_DIR, Server, http, require_environment, tessera_bin

NEAR_TIE_GAP = 0.5
MODELS = {
    "gemma3": ("gemma-3-270m-q4_k_m.gguf", "gemma3_270m_greedy.json",
               ["(gemma3, 18 layers (15 local with a 512-token window + 3 global)", "KV layout: 15 local layers"]),
    "qwen2": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen25_coder_greedy.json",
              ["(qwen2, 24 layers, 2 KV heads x 64", "KV cache"]),
}


def user_message(case):
    """The user turn of a golden chat case (its text is the template rendered around it)."""
    text = case["text"]
    if "<start_of_turn>user\n" in text:
        return text.split("<start_of_turn>user\n", 1)[1].split("<end_of_turn>", 1)[0]
    return text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]


def first_parting(ours, theirs):
    return next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))


def check_against_llama_cpp(case, ids, where):
    gold = case["greedy_ids"]
    k = first_parting(ids, gold)
    if k < len(gold):
        assert k < len(ids), f"{where}: {case['name']} stopped after {len(ids)} tokens"
        assert case["top2_gaps"][k] < NEAR_TIE_GAP, (
            f"{where}: {case['name']} parts from llama.cpp at token {k} (ours {ids[k]}, theirs {gold[k]}) "
            f"where llama.cpp's top-2 gap is {case['top2_gaps'][k]}, not a near-tie")
    return k


@pytest.fixture(scope="module", params=sorted(MODELS))
def real_model(request):
    require_environment()
    file, golden, startup = MODELS[request.param]
    path = os.path.join(SOURCE_DIR, "models", file)
    if not os.path.exists(path):
        pytest.skip(f"{path} is missing (scripts/fetch_models.sh)")
    with open(os.path.join(SOURCE_DIR, "tests", "data", golden)) as f:
        chats = [c for c in json.load(f)["cases"] if c["parse_special"]]
    assert len(chats) == 3
    return request.param, path, chats, startup


def tessera_run(path, *args):
    proc = subprocess.run([tessera_bin(), "run", "--model", path, "--temperature", "0", *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_run_chat_matches_llama_cpp(real_model):
    arch, path, chats, startup = real_model
    case = chats[0]
    # --verbose: the start-up summary and the rendered prompt (run prints only the answer without it)
    shown = tessera_run(path, "--chat", user_message(case), "-n", "1", "--verbose")
    for line in startup:
        assert line in shown.stderr, shown.stderr
    assert case["text"] in shown.stderr  # the prompt it echoes is the template's rendering
    out = json.loads(tessera_run(path, "--chat", user_message(case), "-n", "64", "--ignore-eos", "--json").stdout)
    assert out["prompt_ids"] == case["prompt_ids"]
    assert len(out["ids"]) == 64
    k = check_against_llama_cpp(case, out["ids"], "tessera run")
    print(f"{arch} run {case['name']}: equals llama.cpp for {k} of 64 tokens")


def test_serve_chat_matches_llama_cpp_and_run(real_model):
    arch, path, chats, startup = real_model
    server = Server(model=path)
    try:
        log = server.read_log()
        for line in startup:
            assert line in log, log
        for case in chats:
            status, tok = http(server.base, "POST", "/tokenize",
                               {"messages": [{"role": "user", "content": user_message(case)}]})
            assert status == 200, tok
            assert tok["tokens"] == case["prompt_ids"], case["name"]

        def ask(case):
            return http(server.base, "POST", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": user_message(case)}], "temperature": 0,
                "max_tokens": 64, "ignore_eos": True, "logprobs": True}, timeout=600)
        with concurrent.futures.ThreadPoolExecutor(len(chats)) as pool:
            replies = list(pool.map(ask, chats))
        for case, (status, body) in zip(chats, replies):
            assert status == 200, body
            assert body["usage"]["prompt_tokens"] == len(case["prompt_ids"])
            served = [bytes(t["bytes"]) for t in body["choices"][0]["logprobs"]["content"]]
            assert len(served) == 64
            # llama.cpp's tokens as bytes, one prefix at a time (so a token that is part of a UTF-8
            # character still lines up): piece i = detokenize(gold[:i+1]) minus detokenize(gold[:i]).
            prefixes = [b""]
            for i in range(1, 65):
                status, d = http(server.base, "POST", "/detokenize", {"tokens": case["greedy_ids"][:i]})
                assert status == 200, d
                prefixes.append(d["prompt"].encode())
            k = 0
            while k < 64 and b"".join(served[:k + 1]) == prefixes[k + 1]:
                k += 1
            if k < 64:
                assert case["top2_gaps"][k] < NEAR_TIE_GAP, (
                    f"tessera serve: {case['name']} parts from llama.cpp at token {k} ({served[k]!r} vs the text "
                    f"{prefixes[k + 1][len(prefixes[k]):]!r}) on llama.cpp's top-2 gap {case['top2_gaps'][k]}")
            print(f"{arch} serve {case['name']}: equals llama.cpp for {k} of 64 tokens")
        # The first case, batched with the others here, against `tessera run` alone.
        alone = json.loads(tessera_run(path, "--chat", user_message(chats[0]), "-n", "64", "--ignore-eos",
                                       "--json").stdout)
        assert replies[0][1]["choices"][0]["message"]["content"] == alone["text"]
    finally:
        server.stop()
