"""The two real K-quant GGUFs of scripts/fetch_models.sh (Gemma-3-270M and Qwen2.5-Coder-0.5B-Instruct,
Q4_K_M), driven as a user drives them: `tessera run --model FILE --chat ...` and `tessera serve
--model FILE` with /v1/chat/completions. Skipped when a file is absent.

Checked against llama.cpp's goldens (tests/data/*_greedy.json, scripts/gen_kquant_goldens.py; its
prompts for the chat cases are the model's chat template rendered by hand):
- the start-up lines name the architecture (and, for Gemma 3, its local/global KV layout);
- the model's own chat template turns the user message into exactly the ids llama.cpp was fed;
- the greedy continuation (64 tokens, past EOS) equals llama.cpp's token for token, except where
  it parts on a near-tie of llama.cpp's own logits: tessera's token among llama.cpp's best
  (MODELS' max rank: Qwen its top-2, Gemma its top-4) with llama.cpp's logit for it within 0.5 of
  its best; the criterion of tests/model/test_kquant_golden.cpp (tests/model/llamacpp_golden.h),
  here through the CLI (up to the first parting) and the HTTP server (all 64 positions: after a
  parting the comparison goes on from llama.cpp's token, sent as a token-id prompt to
  /v1/completions), with at most as many partings as each model measures today;
- the server, with the three chat requests sent at once (one batch), gives what `run` gives alone;
- Gemma 3 past its 512-token window with the server's hybrid KV cache freeing the local layers'
  blocks (tests/data/gemma3_270m_window_greedy.json: prompts of 606, 904 and 1532 tokens, 128
  greedy tokens each, sent at once), all positions checked the same way, and the server's metrics
  show the blocks released (tests/engine/test_engine_gemma3_window.cpp does the same in-process).
"""
import concurrent.futures
import json
import os
import subprocess

import pytest

from conftest import SOURCE_DIR, Server, http, metrics, per_kernel_path, require_environment, tessera_bin

NEAR_TIE_GAP = 0.5  # tests/model/llamacpp_golden.h's kNearTieGap
# file, golden, start-up lines, llama.cpp rank a parting token may have (2: its top-2; what each
# model measures today, as RealModel in tests/model/test_kquant_golden.cpp), most partings of the
# three chat cases through the server (what each measures today)
MODELS = {
    "gemma3": ("gemma-3-270m-q4_k_m.gguf", "gemma3_270m_greedy.json",
               ["(gemma3, 18 layers (15 local with a 512-token window + 3 global)", "KV layout: 15 local layers"],
               4, 5),
    "qwen2": ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen25_coder_greedy.json",
              ["(qwen2, 24 layers, 2 KV heads x 64", "KV cache"], 2, {"avx512": 1, "avx2": 2}),
}
# max_partings (the last field) is what each model measures today, per kernel path where the paths
# differ (conftest.per_kernel_path): Qwen's served chats part once on AVX-512 (chat_explain@8) and
# also at chat_reverse@3 on AVX2 (llama.cpp's gap 0.073, tests/model/test_kquant_golden.cpp).
# Gemma 3 past its window (test_serve_gemma3_past_the_window_with_blocks_freed): most partings over
# the 3 x 128 positions, what it measures today (as tests/engine/test_engine_gemma3_window.cpp).
GEMMA3_WINDOW_MAX_PARTINGS = 2


def user_message(case):
    """The user turn of a golden chat case (its text is the template rendered around it)."""
    text = case["text"]
    if "<start_of_turn>user\n" in text:
        return text.split("<start_of_turn>user\n", 1)[1].split("<end_of_turn>", 1)[0]
    return text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]


def first_parting(ours, theirs):
    return next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))


def parting_error(case, k, ours, max_rank):
    """None when tessera's token `ours` at position k is llama.cpp's or one of its first `max_rank`
    with a logit within NEAR_TIE_GAP of its best (tests/model/llamacpp_golden.h's rule); else why not."""
    if ours == case["greedy_ids"][k]:
        return None
    top = case["top_ids"][k]
    rank = top.index(ours) if ours in top else None
    if rank is not None and rank < max_rank and case["top_logits"][k][0] - case["top_logits"][k][rank] < NEAR_TIE_GAP:
        return None
    return (f"{case['name']} parts from llama.cpp at token {k} (ours {ours}, theirs {case['greedy_ids'][k]}): "
            + (f"llama.cpp's #{rank + 1} at {case['top_logits'][k][0] - case['top_logits'][k][rank]:.4f} below its best"
               if rank is not None else "not in llama.cpp's top-5"))


def check_against_llama_cpp(case, ids, max_rank, where):
    gold = case["greedy_ids"]
    k = first_parting(ids, gold)
    if k < len(gold):
        assert k < len(ids), f"{where}: {case['name']} stopped after {len(ids)} tokens"
        err = parting_error(case, k, ids[k], max_rank)
        assert err is None, f"{where}: {err}"
    return k


def display_bytes(token):
    """A completions logprobs token (its text, or bytes:\\xe2\\x80 for a piece that splits a
    character) as bytes."""
    if token.startswith("bytes:"):
        return bytes.fromhex(token[len("bytes:"):].replace("\\x", ""))
    return token.encode()


def served_pieces(body):
    """Each generated token's bytes, from a chat or completions reply with logprobs."""
    lp = body["choices"][0]["logprobs"]
    if "content" in lp:
        return [bytes(t["bytes"]) for t in lp["content"]]
    return [display_bytes(t) for t in lp["tokens"]]


def check_served_against_llama_cpp(base, case, body, max_rank, where):
    """Compares a served greedy continuation with llama.cpp's over all its positions. A served
    token at position j (after llama.cpp's tokens gold[:j]) is token t when its bytes extend
    detokenize(gold[:j]) to detokenize(gold[:j] + [t]) (a token that is part of a UTF-8 character
    still lines up), or, for a control token such as <|im_end|> (detokenize leaves it out), when
    its text tokenizes to [t]. At a parting, tessera's token is the one of llama.cpp's top-5 it is
    (else none of them) and must pass parting_error; the comparison then goes on from llama.cpp's
    token, a /v1/completions request whose prompt is the case's ids and llama.cpp's tokens so far.
    Returns the partings' positions."""
    gold = case["greedy_ids"]

    def detokenize(ids):
        status, d = http(base, "POST", "/detokenize", {"tokens": ids})
        assert status == 200, d
        return d["prompt"].encode()
    prefixes = [b""] + [detokenize(gold[:i]) for i in range(1, len(gold) + 1)]

    def is_token(j, piece, t, extended):  # extended: detokenize(gold[:j] + [t])
        if extended != prefixes[j]:
            return extended == prefixes[j] + piece
        status, d = http(base, "POST", "/tokenize", {"prompt": piece.decode(), "add_special_tokens": False})
        assert status == 200, d
        return d["tokens"] == [t]
    pieces, start, partings = served_pieces(body), 0, []
    while True:
        assert len(pieces) == len(gold) - start, f"{where}: {case['name']}: {len(pieces)} tokens from {start}"
        k = start
        while k < len(gold) and is_token(k, pieces[k - start], gold[k], prefixes[k + 1]):
            k += 1
        if k == len(gold):
            return partings
        piece = pieces[k - start]
        ours = next((t for t in case["top_ids"][k] if is_token(k, piece, t, detokenize(gold[:k] + [t]))), None)
        err = parting_error(case, k, ours, max_rank)
        assert err is None, f"{where}: {err} (ours {piece!r})"
        partings.append(k)
        start = k + 1
        if start == len(gold):
            return partings
        status, body = http(base, "POST", "/v1/completions", {
            "prompt": case["prompt_ids"] + gold[:start], "max_tokens": len(gold) - start, "temperature": 0,
            "ignore_eos": True, "logprobs": 0}, timeout=600)
        assert status == 200, body
        pieces = served_pieces(body)


@pytest.fixture(scope="module", params=sorted(MODELS))
def real_model(request):
    require_environment()
    file, golden, startup, max_rank, max_partings = MODELS[request.param]
    if isinstance(max_partings, dict):
        max_partings = per_kernel_path(**max_partings)
    path = os.path.join(SOURCE_DIR, "models", file)
    if not os.path.exists(path):
        pytest.skip(f"{path} is missing (scripts/fetch_models.sh)")
    with open(os.path.join(SOURCE_DIR, "tests", "data", golden)) as f:
        chats = [c for c in json.load(f)["cases"] if c["parse_special"]]
    assert len(chats) == 3
    return request.param, path, chats, startup, max_rank, max_partings


def tessera_run(path, *args):
    proc = subprocess.run([tessera_bin(), "run", "--model", path, "--temperature", "0", *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_run_chat_matches_llama_cpp(real_model):
    arch, path, chats, startup, max_rank, _ = real_model
    case = chats[0]
    # --verbose: the start-up summary and the rendered prompt (run prints only the answer without it)
    shown = tessera_run(path, "--chat", user_message(case), "-n", "1", "--verbose")
    for line in startup:
        assert line in shown.stderr, shown.stderr
    assert case["text"] in shown.stderr  # the prompt it echoes is the template's rendering
    out = json.loads(tessera_run(path, "--chat", user_message(case), "-n", "64", "--ignore-eos", "--json").stdout)
    assert out["prompt_ids"] == case["prompt_ids"]
    assert len(out["ids"]) == 64
    k = check_against_llama_cpp(case, out["ids"], max_rank, "tessera run")
    print(f"{arch} run {case['name']}: equals llama.cpp for {k} of 64 tokens")


def test_serve_chat_matches_llama_cpp_and_run(real_model):
    arch, path, chats, startup, max_rank, max_partings = real_model
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
        partings = 0
        for case, (status, body) in zip(chats, replies):
            assert status == 200, body
            assert body["usage"]["prompt_tokens"] == len(case["prompt_ids"])
            at = check_served_against_llama_cpp(server.base, case, body, max_rank, "tessera serve")
            print(f"{arch} serve {case['name']}: all 64 tokens compared, partings at {at}")
            partings += len(at)
        assert partings <= max_partings
        # The first case, batched with the others here, against `tessera run` alone.
        alone = json.loads(tessera_run(path, "--chat", user_message(chats[0]), "-n", "64", "--ignore-eos",
                                       "--json").stdout)
        assert replies[0][1]["choices"][0]["message"]["content"] == alone["text"]
    finally:
        server.stop()


def test_serve_gemma3_past_the_window_with_blocks_freed():
    """Gemma 3's window goldens through `tessera serve` (hybrid KV cache on, the default): the three
    long prompts as token ids to /v1/completions at once, 128 tokens each, every position compared
    with llama.cpp's; the local layers' blocks go back behind the window (the metrics count them)."""
    require_environment()
    file, _, _, max_rank, _ = MODELS["gemma3"]
    path = os.path.join(SOURCE_DIR, "models", file)
    if not os.path.exists(path):
        pytest.skip(f"{path} is missing (scripts/fetch_models.sh)")
    with open(os.path.join(SOURCE_DIR, "tests", "data", "gemma3_270m_window_greedy.json")) as f:
        cases = json.load(f)["cases"]
    assert [len(c["prompt_ids"]) > 512 for c in cases] == [True] * 3
    server = Server(["--max-model-len", "2048"], model=path)
    try:
        assert "in 6 KV-cache group(s) of 3 layers, blocks behind a window go back to the pool" in server.read_log()

        def ask(case):
            return http(server.base, "POST", "/v1/completions", {
                "prompt": case["prompt_ids"], "max_tokens": len(case["greedy_ids"]), "temperature": 0,
                "ignore_eos": True, "logprobs": 0}, timeout=600)
        with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
            replies = list(pool.map(ask, cases))
        partings = 0
        for case, (status, body) in zip(cases, replies):
            assert status == 200, body
            assert body["usage"]["prompt_tokens"] == len(case["prompt_ids"])
            at = check_served_against_llama_cpp(server.base, case, body, max_rank, "tessera serve")
            print(f"gemma3 serve {case['name']} ({len(case['prompt_ids'])} prompt tokens): "
                  f"{len(case['greedy_ids'])} tokens compared, partings at {at}")
            partings += len(at)
        assert partings <= GEMMA3_WINDOW_MAX_PARTINGS
        # The local groups (5 of 6) released at least the blocks wholly behind the window of the
        # first requests' last steps: floor((prompt + 126 - 512 + 1) / 16) each (src/kv/README.md).
        released = metrics(server.base)["tessera:kv_cache_window_releases_total"]
        least = sum(5 * ((len(c["prompt_ids"]) + len(c["greedy_ids"]) - 2 - 511) // 16) for c in cases)
        assert released >= least, (released, least)
        print(f"gemma3 serve: {released:.0f} window releases (at least {least})")
    finally:
        server.stop()
