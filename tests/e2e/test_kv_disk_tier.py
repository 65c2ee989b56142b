"""The KV disk tier (serve --kv-cache-dir): the real `tessera serve`, SmolLM2-135M unless noted.

Restart reuse, spill and reload after the pool evicted a prompt, reads held until the request
would be scheduled, damaged files (each kind exactly
counted and recomputed with identical output), namespaces (another KV dtype / model gets no hits),
two live replicas on one directory, the size budget under a stream of prompts, an unwritable and a
full directory. Prompts are token ids (exact block boundaries); outputs are greedy.
"""
import os
import subprocess
import threading
import time

import pytest

from conftest import QWEN_MODEL, http, metrics

BLOCK = 16
HEADER = 104  # kv_disk/block_file.h


def prompt_ids(n, seed):
    # Ordinary vocabulary ids (SmolLM2 and Qwen both have > 40k), distinct per seed.
    return [1000 + (seed * 7919 + i * 104729) % 30000 for i in range(n)]


def complete(server, ids, max_tokens=8):
    status, body = http(server.base, "POST", "/v1/completions",
                        {"prompt": ids, "max_tokens": max_tokens, "temperature": 0}, timeout=600)
    assert status == 200, body
    return body["choices"][0]["text"], body["usage"]["prompt_tokens_details"]["cached_tokens"]


def wait_writes(server, at_least, timeout=60):
    """The I/O thread writes after the step: wait until `at_least` blocks are on disk."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = metrics(server.base)
        if m.get("tessera:kv_disk_writes_total", 0) >= at_least:
            return m
        time.sleep(0.2)
    raise AssertionError(f"fewer than {at_least} blocks written: {metrics(server.base)}")


def namespaces(root):
    return sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))


def block_files(root):
    """{the block's token ids: path} over every namespace's files (token ids follow the header).

    A live server's temp file ("<key>.tmp.<pid>.<n>") may be renamed or removed between listdir and
    open: temp files are skipped, and a file gone by the time it is opened is one not counted."""
    out = {}
    for ns in namespaces(root):
        for name in os.listdir(os.path.join(root, ns)):
            if ".tmp." in name:
                continue
            path = os.path.join(root, ns, name)
            try:
                with open(path, "rb") as f:
                    head = f.read(HEADER + 4 * BLOCK)
            except FileNotFoundError:
                continue
            if len(head) == HEADER + 4 * BLOCK:
                out[tuple(int.from_bytes(head[HEADER + 4 * i:HEADER + 4 * i + 4], "little", signed=True)
                          for i in range(BLOCK))] = path
    return out


def block_of(ids, b):
    return tuple(ids[b * BLOCK:(b + 1) * BLOCK])


def dir_bytes(root):
    total = 0
    for r, _, fs in os.walk(root):
        for f in fs:
            try:
                total += os.path.getsize(os.path.join(r, f))
            except FileNotFoundError:  # a temp file renamed or a block evicted since the listing
                pass
    return total


def serve(start_server, cache_dir, *extra, model=None):
    return start_server("--kv-cache-dir", str(cache_dir), "--max-model-len", "8192", *extra, model=model)


def test_restart_reuses_a_4k_prompt(start_server, tmp_path):
    ids = prompt_ids(4096, 1)
    a = serve(start_server, tmp_path)
    cold, cached = complete(a, ids)
    assert cached == 0
    wait_writes(a, 4096 // BLOCK)
    assert a.stop() == 0
    b = serve(start_server, tmp_path)
    warm, cached = complete(b, ids)
    assert warm == cold
    assert cached == 4080  # 255 blocks: the last prompt token is always computed
    m = metrics(b.base)
    assert m["tessera:kv_disk_hit_blocks_total"] == 255
    assert m["tessera:kv_disk_hit_tokens_total"] == 4080
    assert m["tessera:kv_disk_corrupt_blocks_total"] == 0
    status, info = http(b.base, "GET", "/server_info")
    assert status == 200
    assert info["kv_cache_dir_enabled"] is True
    assert info["kv_cache_dir_size"] == 8 << 30
    assert info["kv_cache_dir_namespace"] == namespaces(tmp_path)[0]
    assert str(tmp_path) not in str(info)


def test_spill_and_reload_after_the_pool_evicted_it(start_server, tmp_path):
    # A pool of 1600 tokens (SmolLM2: 30 layers x 2 x 192 x f16 = 23040 B/token): one 1024-token
    # prompt at a time; the next two evict the first.
    s = serve(start_server, tmp_path, "--kv-cache", str(1600 * 23040))
    first = prompt_ids(1024, 2)
    cold, _ = complete(s, first)
    for seed in (3, 4):
        complete(s, prompt_ids(1024, seed))
    wait_writes(s, 3 * 64)
    before = metrics(s.base)
    assert before["tessera:kv_cache_evictions_total"] > 0
    again, cached = complete(s, first)
    assert again == cold
    assert cached == 1008
    after = metrics(s.base)
    assert after["tessera:kv_disk_hit_tokens_total"] > before["tessera:kv_disk_hit_tokens_total"]


def test_reads_start_when_the_request_would_be_scheduled(start_server, tmp_path):
    # One running slot (--max-num-seqs 1), taken by a long decode: a request whose prefix is on disk
    # waits for its turn before a single block is read, then reloads all of it (63 blocks, in
    # several engine loops) with the cold output.
    ids = prompt_ids(1024, 5)
    a = serve(start_server, tmp_path)
    cold, _ = complete(a, ids, max_tokens=4)
    wait_writes(a, 64)
    assert a.stop() == 0
    b = serve(start_server, tmp_path, "--max-num-seqs", "1")
    done = {}

    def run(key, body):
        status, out = http(b.base, "POST", "/v1/completions", body, timeout=600)
        done[key] = (time.perf_counter(), status, out)

    long = threading.Thread(target=run, args=("long", {"prompt": prompt_ids(32, 6), "max_tokens": 400,
                                                        "temperature": 0, "ignore_eos": True}))
    long.start()
    deadline = time.time() + 60
    while metrics(b.base).get("tessera:num_requests_running", 0) < 1 and time.time() < deadline:
        time.sleep(0.05)
    reload = threading.Thread(target=run, args=("reload", {"prompt": ids, "max_tokens": 4, "temperature": 0}))
    reload.start()
    time.sleep(0.5)
    assert long.is_alive(), "the long request ended before the check: no slot was taken"
    m = metrics(b.base)
    assert m.get("tessera:kv_disk_read_seconds_count", 0) == 0  # parked, nothing read yet
    assert m["tessera:kv_disk_lookups_total"] == 2  # the long prompt (no hit) and this one
    long.join()
    reload.join()
    assert done["long"][1] == 200 and done["reload"][1] == 200
    assert done["reload"][0] > done["long"][0]
    body = done["reload"][2]
    assert body["choices"][0]["text"] == cold
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 1008
    m = metrics(b.base)
    assert m["tessera:kv_disk_read_seconds_count"] == 63
    assert m["tessera:kv_disk_hit_blocks_total"] == 63


DAMAGES = ["truncated", "bit_flip", "wrong_key", "zero_length", "garbage"]


def damage(path, kind, other_path):
    data = open(path, "rb").read()
    if kind == "truncated":
        data = data[: len(data) // 2]
    elif kind == "bit_flip":
        data = bytearray(data)
        data[len(data) - 100] ^= 0x04
        data = bytes(data)
    elif kind == "wrong_key":
        data = open(other_path, "rb").read()  # a whole, valid file of another block under this name
    elif kind == "zero_length":
        data = b""
    else:
        data = os.urandom(len(data))
    with open(path, "wb") as f:
        f.write(data)


def test_damaged_files_are_counted_deleted_and_recomputed(start_server, tmp_path):
    prompts = {kind: prompt_ids(512, 10 + i) for i, kind in enumerate(DAMAGES)}
    a = serve(start_server, tmp_path)
    cold = {kind: complete(a, ids)[0] for kind, ids in prompts.items()}
    wait_writes(a, len(DAMAGES) * 32)
    assert a.stop() == 0
    files = block_files(tmp_path)
    for kind, ids in prompts.items():  # block 10 of each prompt's chain, each a different damage
        damage(files[block_of(ids, 10)], kind, files[block_of(ids, 11)])
    b = serve(start_server, tmp_path)
    for kind, ids in prompts.items():
        text, cached = complete(b, ids)
        assert text == cold[kind], kind
        assert cached == 10 * BLOCK, kind  # blocks 0..9 from disk, the chain stops at the damage
    m = metrics(b.base)
    assert m["tessera:kv_disk_corrupt_blocks_total"] == len(DAMAGES)
    assert m["tessera:kv_disk_enabled"] == 1
    wait_writes(b, len(DAMAGES))  # the damaged block, recomputed, is written again whole
    files = block_files(tmp_path)
    for ids in prompts.values():
        assert os.path.getsize(files[block_of(ids, 10)]) == os.path.getsize(files[block_of(ids, 0)])


def test_another_kv_dtype_or_model_gets_no_hits(start_server, tmp_path):
    ids = prompt_ids(512, 20)
    a = serve(start_server, tmp_path)
    complete(a, ids)
    wait_writes(a, 32)
    assert a.stop() == 0
    q8 = serve(start_server, tmp_path, "--kv-dtype", "q8")
    q8_cold, cached = complete(q8, ids)
    assert cached == 0
    m = metrics(q8.base)
    assert m["tessera:kv_disk_lookups_total"] == 1  # looked up in its own namespace: empty
    assert m["tessera:kv_disk_hit_blocks_total"] == 0
    wait_writes(q8, 32)
    assert q8.stop() == 0
    assert len(namespaces(tmp_path)) == 2
    q8 = serve(start_server, tmp_path, "--kv-dtype", "q8")  # q8 blocks (values + row scales) reload
    assert complete(q8, ids) == (q8_cold, 496)
    assert q8.stop() == 0
    if os.path.exists(QWEN_MODEL):
        qwen = serve(start_server, tmp_path, model=QWEN_MODEL)
        _, cached = complete(qwen, ids)
        assert cached == 0
        assert metrics(qwen.base)["tessera:kv_disk_hit_blocks_total"] == 0
        qwen.stop()
        assert len(namespaces(tmp_path)) == 3


def test_two_live_replicas_share_one_directory(start_server, tmp_path):
    a = serve(start_server, tmp_path)
    b = serve(start_server, tmp_path)
    ids = prompt_ids(1024, 30)
    cold, _ = complete(a, ids)
    wait_writes(a, 64)
    warm, cached = complete(b, ids)  # b never computed it
    assert warm == cold
    assert cached == 1008
    # And the other way round, both writing at once.
    ids2 = prompt_ids(1024, 31)
    cold2, _ = complete(b, ids2)
    wait_writes(b, 64)
    assert complete(a, ids2) == (cold2, 1008)
    assert metrics(a.base)["tessera:kv_disk_corrupt_blocks_total"] == 0
    # Both compute one new prompt at the same time: two writers of every key, each renaming a whole
    # file over the other's. A third replica then reads all of it, intact.
    ids3 = prompt_ids(1024, 32)
    results = {}
    threads = [threading.Thread(target=lambda srv, k: results.__setitem__(k, complete(srv, ids3)), args=(srv, k))
               for k, srv in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["a"][0] == results["b"][0]
    deadline = time.time() + 60
    while time.time() < deadline and not all(block_of(ids3, k) in block_files(tmp_path) for k in range(64)):
        time.sleep(0.2)
    c = serve(start_server, tmp_path)
    assert complete(c, ids3) == (results["a"][0], 1008)
    assert metrics(c.base)["tessera:kv_disk_corrupt_blocks_total"] == 0


def test_the_size_budget_holds_under_a_stream_of_prompts(start_server, tmp_path):
    budget = 8 << 20  # 22 blocks of SmolLM2 (368640 B payload + header + tokens)
    s = serve(start_server, tmp_path, "--kv-cache-dir-size", "8MiB")
    block_file = 368640 + HEADER + 4 * BLOCK
    for seed in range(8):
        complete(s, prompt_ids(256, 40 + seed), max_tokens=1)
        time.sleep(0.5)
        assert dir_bytes(tmp_path) <= budget + block_file
    m = wait_writes(s, 8 * 15)
    assert m["tessera:kv_disk_evictions_total"] > 0
    assert m["tessera:kv_disk_bytes"] <= budget


def test_an_unwritable_directory_is_a_warning_not_a_failure(start_server, tmp_path):
    (tmp_path / "file").write_text("x")
    s = serve(start_server, tmp_path / "file" / "cache")
    text, _ = complete(s, prompt_ids(64, 50))
    assert text
    assert "the KV disk tier is off" in s.read_log()
    status, info = http(s.base, "GET", "/server_info")
    assert info["kv_cache_dir_enabled"] is False


def test_a_full_directory_turns_the_tier_off(start_server, tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a 1 MiB tmpfs needs root (and a kernel that allows it here)")
    try:
        s = serve(start_server, mnt)
        ids = prompt_ids(512, 60)
        cold, _ = complete(s, ids)
        deadline = time.time() + 30
        while metrics(s.base).get("tessera:kv_disk_enabled") != 0 and time.time() < deadline:
            time.sleep(0.2)
        m = metrics(s.base)
        assert m["tessera:kv_disk_enabled"] == 0
        assert m["tessera:kv_disk_write_errors_total"] >= 1
        assert "the KV disk tier at" in s.read_log() and "is off" in s.read_log()
        assert complete(s, ids)[0] == cold  # still serving, from the pool
        s.stop()
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


GEMMA_MODEL = os.path.join(os.path.dirname(QWEN_MODEL), "gemma-3-270m-q4_k_m.gguf")


def test_a_sliding_window_model_stores_only_its_windows(start_server, tmp_path):
    """Gemma-3-270M: 1 full-attention group and 5 sliding groups (window 512 = 32 blocks)."""
    if not os.path.exists(GEMMA_MODEL):
        pytest.skip(f"{GEMMA_MODEL} is missing (scripts/fetch_models.sh)")
    ids = prompt_ids(2048, 70)
    a = serve(start_server, tmp_path, model=GEMMA_MODEL)
    cold, _ = complete(a, ids)
    m = wait_writes(a, 128)
    assert a.stop() == 0
    writes = m["tessera:kv_disk_writes_total"]
    # The full group's 128 blocks; each sliding group only the 32-block window of the prompt's end
    # (+ 2 blocks of slack), not its 128 blocks (which would make 768).
    files = sum(len(os.listdir(os.path.join(tmp_path, ns))) for ns in namespaces(tmp_path))
    assert files <= 128 + 5 * 35, (writes, files)
    b = serve(start_server, tmp_path, model=GEMMA_MODEL)
    warm, cached = complete(b, ids)
    assert warm == cold
    assert cached == 2032
    assert metrics(b.base)["tessera:kv_disk_corrupt_blocks_total"] == 0
