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

A second test holds the published stream against the block pool's own record: the helper
tests/kv_events/kv_events_record runs a real engine with the real publisher and writes down every
batch the engine drains from the pool; the SUB socket must receive exactly those.
"""
import contextlib
import json
import os
import random
import subprocess
import threading
import time

import pytest

from conftest import SOURCE_DIR, free_port, http, metrics, tessera_bin

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


@contextlib.contextmanager
def kv_event_subscriber(prefix=b"kv@"):
    """A SUB socket bound to a free local port (a non-wildcard endpoint: the server connects to it)
    and its Collector, reading from before the server starts. Yields (the endpoint for --kv-events,
    the collector); closes both on exit."""
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    sub.bind(endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, prefix)
    collector = Collector(sub)
    collector.start()
    try:
        yield endpoint, collector
    finally:
        collector.done.set()
        collector.join()
        sub.close(linger=0)
        ctx.term()


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
    with kv_event_subscriber() as (endpoint, collector):
        # 4 MiB holds 11 blocks of 16 tokens of SmolLM2 (f16: 368,640 bytes a block): 176 tokens.
        server = start_server("--kv-events", endpoint, "--kv-cache", "4MiB", "--max-model-len", "160")
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
            assert (len(hashes), block_size, len(tokens), lora_id, medium, lora_name) == (1, BLOCK, BLOCK, None, "CPU", None)
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
            assert len(e) == 3 and e[2] == "CPU" and len(e[1]) == 1
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


def record_helper():
    """tests/kv_events/kv_events_record: $TESSERA_KV_EVENTS_RECORD (set by ctest), else beside the binary."""
    env = os.environ.get("TESSERA_KV_EVENTS_RECORD")
    if env and os.path.exists(env):
        return env
    binary = tessera_bin()
    if binary is None:
        return None
    build = os.path.dirname(os.path.dirname(os.path.dirname(binary)))  # build/<preset>/src/cli/tessera
    path = os.path.join(build, "tests", "kv_events", "kv_events_record")
    return path if os.path.exists(path) else None


def test_published_events_are_the_block_pools_own_record(tmp_path):
    """A real engine (stories260K, 20 KV blocks of 16 tokens) runs 10 rounds of 2 prompts sharing
    prefixes; tests/kv_events/kv_events_record writes down each batch the engine drains from the
    block pool before handing it to the publisher. What a SUB socket receives, decoded by msgpack,
    must be that record exactly: batch for batch, event for event (kind, hash, parent, tokens,
    block size), sequence numbers 0..n-1, nothing dropped."""
    helper = record_helper()
    if helper is None:
        pytest.skip("no kv_events_record helper (build the kv_events_record target)")
    stories = os.path.join(SOURCE_DIR, "tests", "data", "models", "stories260K.gguf")
    rng = random.Random(2830)
    systems = [[rng.randrange(1, 512) for _ in range(2 * BLOCK)] for _ in range(3)]
    rounds = []
    for r in range(10):  # two prompts per round: a shared system prefix + a turn of their own
        rounds.append([systems[(r + k) % 3] + [rng.randrange(1, 512) for _ in range(BLOCK + 5 * k + 3)]
                       for k in range(2)])
    rounds_path, record_path = tmp_path / "rounds.json", tmp_path / "record.json"
    rounds_path.write_text(json.dumps(rounds))

    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    port = free_port()
    sub.bind(f"tcp://127.0.0.1:{port}")
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    monitor = sub.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
    collector = Collector(sub)
    proc = subprocess.Popen([helper, stories, str(20 * BLOCK * 640), f"tcp://127.0.0.1:{port}", str(rounds_path),
                             str(record_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        ready = proc.stdout.readline().split()
        assert ready[:1] == ["ready"], proc.stderr.read()
        num_blocks = int(ready[1])
        # The publisher's connection is up (ZMTP handshake done); the subscription follows it on the
        # same connection, before anything the helper publishes after "go".
        assert monitor.poll(10000), "the publisher never connected"
        collector.start()
        time.sleep(0.5)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.wait(timeout=120) == 0, proc.stderr.read()
        messages = collector.stop(quiet_s=0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
        collector.done.set()
        if collector.is_alive():
            collector.join()
        monitor.close(linger=0)
        sub.close(linger=0)
        ctx.term()
    record = json.loads(record_path.read_text())
    assert num_blocks == record["num_kv_blocks"] == 20

    # Frames and sequence numbers: every batch the pool's record has, numbered without a gap.
    assert record["num_batches_dropped"] == 0 and record["num_batches_sent"] == len(record["batches"])
    assert [len(m) for m in messages] == [3] * len(messages)
    assert {m[0] for m in messages} == {record["topic"].encode()}
    assert [int.from_bytes(m[1], "big") for m in messages] == list(range(len(record["batches"])))

    # Payloads: msgpack's decoding of each message is the recorded batch, event by event.
    def expected(e):
        if e["kind"] == "BlockStored":
            return ["BlockStored", [int(e["hash"])], None if e["parent"] is None else int(e["parent"]), e["tokens"],
                    record["block_size"], None, "CPU", None]
        if e["kind"] == "BlockRemoved":
            return ["BlockRemoved", [int(e["hash"])], "CPU"]
        return ["AllBlocksCleared"]
    for m, batch in zip(messages, record["batches"]):
        ts, events, rank = msgpack.unpackb(m[2])
        assert rank == 0 and abs(ts - time.time()) < 600
        assert events == [expected(e) for e in batch]

    # The record itself is the cache's life: removals only of stored copies, evictions happened and
    # are the pool's eviction count, and what is left stored is what the pool still has cached.
    live = {}
    stored = removed = 0
    for batch in record["batches"]:
        for e in batch:
            if e["kind"] == "BlockStored":
                live[e["hash"]] = live.get(e["hash"], 0) + 1
                stored += 1
            else:
                assert e["kind"] == "BlockRemoved" and live.get(e["hash"], 0) > 0, e
                live[e["hash"]] -= 1
                removed += 1
    print(f"pool record: {len(record['batches'])} batches, {stored} stored, {removed} removed; all received")
    # The script's own numbers (both prompts of a round are prefilled in one step, so one batch a
    # round; 20 blocks hold about 3 rounds).
    assert (len(record["batches"]), stored, removed) == (10, 26, 13)
    assert removed == record["num_evictions"]
    assert sum(live.values()) == record["num_cached_blocks"]
