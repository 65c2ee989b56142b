"""KV-cache events (`tessera serve --kv-events`): a pyzmq SUB socket reads what the server publishes
while prompts that share a prefix run and a small KV cache forces evictions; the payloads are
decoded with `msgpack` (vLLM's array layout, kv_events/event_encoder.h) and checked against an
independent recomputation and the block pool's own counters:

- frames [topic, 8-byte big-endian seq, payload]; topic kv@127.0.0.1:<port>@smol; seq 0, 1, 2, ...
  without gaps;
- each BlockStored is one full block of a prompt that was sent: its token ids are the prompt's
  tokens in block_size chunks, parent hashes chain chunk i to chunk i-1 (None for chunk 0), and a
  hash always names the same prefix; the first prompt stores its 4 blocks in order, the second
  (same first 3 blocks) only its 4th, with the shared 3rd block as parent;
- each BlockRemoved names a block stored before and not removed since;
- BlockRemoved events == the server's tessera:kv_cache_evictions, and the blocks still stored ==
  tessera:kv_cache_blocks_cached once every request has ended (every cached block is then free).
Prompts are token ids (POST /v1/completions with a list), so the blocks are known exactly.
"""
import random
import threading
import time

import pytest

from conftest import free_port, http, metrics

zmq = pytest.importorskip("zmq")
msgpack = pytest.importorskip("msgpack")

BLOCK = 16  # the default --block-size


def complete(base, ids):
    status, body = http(base, "POST", "/v1/completions",
                        {"model": "smol", "prompt": ids, "max_tokens": 1, "temperature": 0})
    assert status == 200, body
    return body


class Collector(threading.Thread):
    """Reads the SUB socket from before the server starts until stop(): a SUB only attaches a new
    publisher connection (and sends it the subscription) when its owner calls into it, so a socket
    read only at the end would have every earlier message dropped by the PUB."""

    def __init__(self, sub):
        super().__init__(daemon=True)
        self.sub, self.messages, self.done = sub, [], threading.Event()

    def run(self):
        while not self.done.is_set():
            if self.sub.poll(50):
                self.messages.append(self.sub.recv_multipart())

    def stop(self, quiet_s=1.5, limit_s=30):
        """Returns every message once none has arrived for quiet_s (the engine publishes after the step)."""
        deadline = time.time() + limit_s
        count = -1
        while time.time() < deadline and count != len(self.messages):
            count = len(self.messages)
            time.sleep(quiet_s)
        self.done.set()
        self.join()
        return self.messages


def settled_metrics(base, names, tries=20):
    """The counters once two reads agree (the engine publishes them after the step)."""
    last = None
    for _ in range(tries):
        m = metrics(base)
        now = tuple(m.get(n) for n in names)
        if now == last:
            return dict(zip(names, now))
        last = now
        time.sleep(0.3)
    return dict(zip(names, last))


def test_kv_events_match_the_prefix_cache(start_server):
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    port = free_port()
    sub.bind(f"tcp://127.0.0.1:{port}")  # a non-wildcard endpoint: the server connects to it
    sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
    collector = Collector(sub)
    collector.start()
    # 4 MiB holds 11 blocks of 16 tokens of SmolLM2 (f16: 368,640 bytes a block): 176 tokens.
    server = start_server("--kv-events", f"tcp://127.0.0.1:{port}", "--kv-cache", "4MiB",
                          "--max-model-len", "160")
    try:
        rng = random.Random(28)
        shared = [rng.randrange(1000, 20000) for _ in range(3 * BLOCK)]
        p1 = shared + [rng.randrange(1000, 20000) for _ in range(BLOCK + 4)]   # 4 full blocks
        p2 = shared + [rng.randrange(1000, 20000) for _ in range(BLOCK + 4)]   # shares 3 of them
        others = [[rng.randrange(1000, 20000) for _ in range(6 * BLOCK + 3)] for _ in range(3)]
        prompts = [p1, p2, *others, p1]
        for ids in prompts:
            complete(server.base, ids)
        messages = collector.stop()
        m = settled_metrics(server.base, ["tessera:kv_cache_evictions_total", "tessera:kv_cache_blocks_cached",
                                          "tessera:num_requests_running"])
    finally:
        collector.done.set()
        collector.join()
        sub.close(linger=0)
        ctx.term()

    assert messages, "no KV events arrived: " + server.read_log()
    topics = {msg[0] for msg in messages}
    assert topics == {f"kv@127.0.0.1:{server.port}@smol".encode()}
    assert all(len(msg) == 3 and len(msg[1]) == 8 for msg in messages)
    seqs = [int.from_bytes(msg[1], "big") for msg in messages]
    assert seqs == list(range(len(messages))), seqs

    events = []
    for msg in messages:
        batch = msgpack.unpackb(msg[2])
        assert len(batch) == 3 and isinstance(batch[0], float) and batch[2] == 0
        assert abs(batch[0] - time.time()) < 600
        events += batch[1]

    # Replay: each stored hash names one block-aligned prefix of a sent prompt.
    prefix_of = {}   # hash -> tuple of every token up to the end of its block
    live = {}        # hash -> copies currently cached
    stored, removed = [], []
    for e in events:
        if e[0] == "BlockStored":
            tag, hashes, parent, tokens, block_size, lora_id, medium, lora_name = e
            assert (len(hashes), block_size, len(tokens), lora_id, medium, lora_name) == (1, BLOCK, BLOCK, None, "GPU", None)
            if parent is None:
                prefix = tuple(tokens)
            else:
                assert live.get(parent, 0) > 0, "parent block not cached"
                prefix = prefix_of[parent] + tuple(tokens)
            assert any(tuple(p[:len(prefix)]) == prefix for p in prompts), "a block of no prompt"
            assert prefix_of.setdefault(hashes[0], prefix) == prefix, "one hash, two prefixes"
            live[hashes[0]] = live.get(hashes[0], 0) + 1
            stored.append(hashes[0])
        elif e[0] == "BlockRemoved":
            assert len(e) == 3 and e[2] == "GPU" and len(e[1]) == 1
            h = e[1][0]
            assert live.get(h, 0) > 0, "removed a block that was not stored"
            live[h] -= 1
            removed.append(h)
        else:
            pytest.fail(f"unexpected event {e!r}")

    def chunk_hashes(ids):
        return [next(h for h, p in prefix_of.items() if p == tuple(ids[:BLOCK * (i + 1)]))
                for i in range(len(ids) // BLOCK)]

    # The first prompt stores its 4 full blocks in chain order; the second hits 3 and stores 1.
    p1_hashes = chunk_hashes(p1)
    assert stored[:4] == p1_hashes
    assert stored[4] == chunk_hashes(p2)[3]
    assert events[4][2] == p1_hashes[2]
    for ids in others:
        assert set(chunk_hashes(ids)) <= set(stored)
    print(f"kv events: {len(messages)} batches, {len(stored)} BlockStored, {len(removed)} BlockRemoved")
    assert removed, "the small cache evicted nothing"
    assert len(removed) == m["tessera:kv_cache_evictions_total"]
    assert sum(live.values()) == m["tessera:kv_cache_blocks_cached"]
    assert m["tessera:num_requests_running"] == 0
