"""Issue 30, finding 5, as a user meets it: `tessera run --model FILE` on hostile GGUFs, each under
`ulimit -v 8000000` (8 GB of address space), must end in a clean error (exit status 1 and a message,
no signal, no abort) within 5 s, with peak RSS under twice the file size plus the normal footprint
(the peak of the same command on the intact model). The corpus: the committed fuzz seeds
(fuzz/corpus/hostile-*, written by tests/model/test_hostile_gguf.cpp), and files generated here
because they are big or cut from a real model: a uint8 metadata array of 160 Mi items (160 MiB),
stories260K with huge hyperparameters patched in, and stories260K truncated at every section.
In-process twins of these checks: tests/model/test_hostile_gguf.cpp."""
import glob
import os
import struct
import subprocess
import sys

import pytest

from conftest import SLOWDOWN, SOURCE_DIR, is_sanitized, sanitizer_report, tessera_bin
from gguf_file import GgufFile, with_uint_value

STORIES = os.path.join(SOURCE_DIR, "tests", "data", "models", "stories260K.gguf")
ADDRESS_LIMIT_KIB = 8_000_000  # ulimit -v 8000000: 8 GB of address space
TIME_LIMIT_S = 5.0 * SLOWDOWN


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def huge_uint8_array(path, items=160 << 20):
    """A file whose one metadata value is a uint8 array of `items` items (decoding each item into a
    metadata value cost ~48 bytes: 7.5 GiB for this one before the reader's budget)."""
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1))
        f.write(gguf_string("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 0, items))
        chunk = b"\x01" * (16 << 20)
        for _ in range(items // len(chunk)):
            f.write(chunk)
        f.write(b"\x01" * (items % len(chunk)))


def generated_corpus(tmp):
    files = {}
    path = os.path.join(tmp, "uint8-array-160Mi.gguf")
    huge_uint8_array(path)
    files["uint8-array-160Mi"] = path
    for key, value in [("llama.block_count", 1 << 24), ("llama.embedding_length", 1 << 24),
                       ("llama.feed_forward_length", 1 << 30), ("llama.attention.head_count", 1 << 20),
                       ("llama.context_length", (1 << 32) - 1)]:
        name = f"stories-{key.split('.')[-1]}-{value}"
        path = os.path.join(tmp, name + ".gguf")
        with_uint_value(STORIES, path, key, value)
        files[name] = path
    data = open(STORIES, "rb").read()
    g = GgufFile(data)
    first_tensor = min(off for _, _, off in g.tensors.values())
    cuts = {"magic": 2, "counts": 20, "first-key": 30, "metadata": 2000, "tensor-infos": first_tensor - 600,
            "data-start": first_tensor, "data-middle": len(data) // 2, "last-byte": len(data) - 1}
    for where, at in cuts.items():
        path = os.path.join(tmp, f"stories-cut-at-{where}.gguf")
        with open(path, "wb") as f:
            f.write(data[:at])
        files[f"stories-cut-at-{where}"] = path
    return files


# Runs argv[1:] and prints "<exit status> <peak RSS KiB> <seconds>". A fresh small interpreter forks
# the command, so its peak RSS is its own: ru_maxrss survives exec, and a child forked (or vforked)
# straight from this test process would start with this process's RSS as its peak.
MEASURE = """
import os, sys, time
start = time.monotonic()
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, time.monotonic() - start)
"""


def run_limited(model):
    """`tessera run` on `model` under `ulimit -v 8000000`: (exit status, stderr, seconds, peak RSS bytes).
    An ASan binary cannot start under an address-space limit (it maps terabytes of shadow), so there
    the limit is ASan's own: any single allocation over 8 GB is a sanitizer report, which fails."""
    limit, env = f"ulimit -v {ADDRESS_LIMIT_KIB} && ", None
    if is_sanitized(tessera_bin()):
        limit = ""
        env = {**os.environ, "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
               f":max_allocation_size_mb={ADDRESS_LIMIT_KIB // 1000}:allocator_may_return_null=0"}
    args = ["/bin/sh", "-c", limit + "exec \"$@\"", "sh", sys.executable, "-S", "-c",
            MEASURE, tessera_bin(), "run", "--model", model, "--prompt-ids", "1", "-n", "1", "-q", "--kv-cache",
            "16MiB", "-t", "1"]
    try:
        r = subprocess.run(args, capture_output=True, timeout=60 * SLOWDOWN, env=env)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {60 * SLOWDOWN:.0f} s", 60.0 * SLOWDOWN, 0
    status, peak_kib, seconds = r.stdout.decode().split()
    return int(status), r.stderr.decode("utf-8", "replace"), float(seconds), int(peak_kib) * 1024


@pytest.fixture(scope="module")
def baseline():
    if tessera_bin() is None:
        pytest.skip("no tessera binary")
    if not os.path.exists(STORIES):
        pytest.skip("tests/data/models/stories260K.gguf is missing")
    status, stderr, _, peak = run_limited(STORIES)
    assert sanitizer_report(stderr) is None, sanitizer_report(stderr)
    assert status == 0, f"the intact model fails under the limit: {stderr}"
    print(f"stories260K (intact): peak RSS {peak / 2**20:.0f} MiB, the normal footprint")
    return peak


def check_clean_error(name, path, baseline):
    status, stderr, seconds, peak = run_limited(path)
    size = os.path.getsize(path)
    print(f"{name}: exit {status}, {seconds:.2f} s, peak RSS {peak / 2**20:.0f} MiB, file {size / 2**20:.1f} MiB: "
          f"{stderr.strip().splitlines()[-1] if stderr.strip() else ''}")
    assert sanitizer_report(stderr) is None, f"{name}:\n{sanitizer_report(stderr)}"  # (ASan exits 1 too)
    assert status == 1, f"{name}: exit status {status} (a signal is negative): {stderr[-2000:]}"
    assert "error" in stderr, stderr
    assert "check failed" not in stderr and "bad_alloc" not in stderr, stderr
    assert seconds < TIME_LIMIT_S, f"{name}: {seconds:.2f} s"
    assert peak < 2 * size + baseline, f"{name}: peak RSS {peak} >= 2 x {size} + {baseline}"


def test_committed_hostile_seeds_end_in_clean_errors(baseline):
    seeds = sorted(glob.glob(os.path.join(SOURCE_DIR, "fuzz", "corpus", "hostile-*")))
    assert len(seeds) >= 17
    for path in seeds:
        check_clean_error(os.path.basename(path), path, baseline)


def test_generated_hostile_files_end_in_clean_errors(baseline, tmp_path):
    for name, path in generated_corpus(str(tmp_path)).items():
        check_clean_error(name, path, baseline)
        os.remove(path)
