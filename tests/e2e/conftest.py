"""Fixtures for the end-to-end server tests: the real `tessera serve` on a free loopback port.

Needs: the tessera binary ($TESSERA_BIN, else build*/src/cli/tessera), the default model (found by
the binary; $TESSERA_MODEL overrides), and the pip packages `openai` and `pytest`. A missing
openai package is installed with pip once; when that fails the tests skip with a clear message.

Under TESSERA_NO_SKIP=1 (CI: .ci/run, and scripts/test.sh when CI=true) a skip is a failure (see
pytest_runtest_makereport; ALLOWED_SKIPS lists what may still skip) and nothing is pip-installed
from a test: what the tests need is scripts/setup.sh's to install, and a failed install must show.
$TESSERA_TEST_COUNTS_DIR, when set, receives one JSON file of outcome counts per pytest run
(scripts/test.sh sums them per stage).

Against a sanitizer build (scripts/test.sh runs a subset on the ASan + UBSan binary) every server
is checked at teardown for a sanitizer report in its output, and $TESSERA_E2E_SLOWDOWN scales the
timing bounds (see SLOWDOWN).
"""
import functools
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

SOURCE_DIR = os.environ.get("TESSERA_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
SERVED_NAME = "smol"
# The timing bounds in these tests are set for a Release build. A Debug + ASan/UBSan build does the
# same work about 10x slower (-O0 kernels, checked memory accesses, quarantined frees, the leak scan
# at exit), so a bound on how long the server takes to do something is multiplied by SLOWDOWN
# ($TESSERA_E2E_SLOWDOWN, 1 by default; the sanitizer stage of scripts/test.sh sets 10; measured:
# 24 tokens of SmolLM2 cost 4.2 s of CPU there, 0.24 s in Release). So is a --shutdown-grace that
# streams must finish within, and the slack a test allows for the work after a deadline. A bound
# that is the server's own clock with no work behind it (the header deadline) is not scaled.
SLOWDOWN = float(os.environ.get("TESSERA_E2E_SLOWDOWN", "1"))
START_TIMEOUT_S = 180 * SLOWDOWN


def host_load_factor():
    """How much slower than quiet this host runs work now: its run queue per core (the 1-minute load
    average over the cores), at least 1. A 2-core CI host under `ctest -j2` beside other work reads
    ~2: each of the server's threads gets about half a core, and a step, a poll or a wake-up takes
    about twice as long."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def time_bound(seconds):
    """A wall-clock bound for work that takes well under `seconds` on a quiet host in a Release
    build, scaled for this run: by SLOWDOWN (the sanitizer build) and by host_load_factor() (a
    loaded host). A bound that is the server's own clock with no work behind it is not scaled."""
    return seconds * SLOWDOWN * host_load_factor()
# A sanitizer report's first line (ASan, LeakSanitizer) or UBSan's "file:line:col: runtime error:".
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


NO_SKIP = os.environ.get("TESSERA_NO_SKIP") == "1"
# Skips that TESSERA_NO_SKIP=1 still accepts: regular expressions matched against the skip's reason.
# Only what no CI host can be asked to provide belongs here (an instruction set the CPU lacks); a
# missing package, model or binary is a set-up failure. None of the end-to-end tests skips for such a
# reason today.
ALLOWED_SKIPS = (r"^ISA unavailable \(CPU or build\): ",)


def refused_skip(reason):
    """Whether a skip with this reason fails the run (TESSERA_NO_SKIP=1 and not in ALLOWED_SKIPS)."""
    return NO_SKIP and not any(re.search(p, reason) for p in ALLOWED_SKIPS)


def skip_reason(report):
    """A skip report's reason, without pytest's "Skipped: " in front."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under TESSERA_NO_SKIP=1 a skipped test (in its set-up, e.g. a fixture's pytest.skip, or its
    body) is reported as failed, with the skip's reason."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and refused_skip(skip_reason(report)):
        report.outcome = "failed"
        report.longrepr = f"TESSERA_NO_SKIP=1 (CI) refuses this skip: {skip_reason(report)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same for a module that skips as a whole (pytest.importorskip at import)."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and refused_skip(skip_reason(report)):
        report.outcome = "failed"
        report.longrepr = f"TESSERA_NO_SKIP=1 (CI) refuses this module's skip: {skip_reason(report)}"


def pytest_sessionfinish(session, exitstatus):
    """Outcome counts of this run for scripts/test.sh's per-stage summary ($TESSERA_TEST_COUNTS_DIR)."""
    out_dir = os.environ.get("TESSERA_TEST_COUNTS_DIR")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if not out_dir or reporter is None:
        return
    # (a passed set-up or teardown is filed under "", a failed one under "error")
    counts = {key: len(reporter.stats.get(key, [])) for key in ("passed", "failed", "skipped", "error")}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"pytest-{os.getpid()}.json"), "w") as f:
        json.dump({"kind": "pytest", "args": session.config.invocation_params.args, **counts}, f)


def auto_install(package, module_ok, timeout):
    """pip-installs `package` for a developer running the tests by hand; returns None when
    module_ok() then holds, else the reason. Under TESSERA_NO_SKIP=1 (CI) it installs nothing: a
    package that scripts/setup.sh did not install must fail the run, not be repaired by the test."""
    if NO_SKIP:
        return f"{package} is missing (TESSERA_NO_SKIP=1: scripts/setup.sh must install it)"
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], check=True, timeout=timeout,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except Exception as e:  # noqa: BLE001
        return f"{package} is missing and `pip install {package}` failed ({e})"
    return None if module_ok() else f"`pip install {package}` did not provide it"


def pytest_configure(config):
    # Claude Code's run prefills a ~13k-token prompt (minutes on a small CPU): ctest runs it as its own
    # test (e2e_claude_code), and e2e_server deselects it.
    config.addinivalue_line("markers", "claude_code: runs the claude CLI against the server (slow; own ctest)")


def sanitizer_report(text):
    """The sanitizer report in a process's output (from its first line on), or None."""
    at = [i for i in (text.find(m) for m in SANITIZER_MARKERS) if i >= 0]
    if not at:
        return None
    start = text.rfind("\n", 0, min(at)) + 1
    return text[start:start + 8000]


def ensure_openai():
    def importable():
        try:
            import openai  # noqa: F401
            return True
        except ImportError:
            return False
    return None if importable() else auto_install("openai", importable, timeout=300)


def tessera_bin():
    env = os.environ.get("TESSERA_BIN")
    if env and os.path.exists(env):
        return env
    found = set(glob.glob(os.path.join(SOURCE_DIR, "build*", "**", "src", "cli", "tessera"), recursive=True) +
                glob.glob(os.path.join(SOURCE_DIR, "build*", "src", "cli", "tessera")))
    return max(found, key=os.path.getmtime) if found else None  # the freshest build


@functools.lru_cache(maxsize=None)
def is_sanitized(binary):
    """Whether `binary` is an ASan build (it imports or defines the ASan runtime's entry point)."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


@functools.lru_cache(maxsize=None)
def kernels_path():
    """The kernel path tessera takes on this host: "avx512", "avx2" or "scalar", from its start-up
    summary (the servers the tests start inherit the same environment, TESSERA_ISA included)."""
    out = subprocess.run([tessera_bin(), "run", "-v", "-n", "1", "--prompt", "hi"], capture_output=True, text=True,
                         timeout=120 * SLOWDOWN)
    found = re.search(r"kernels (\w+)", out.stderr)
    assert found, out.stderr
    return found.group(1)


def per_kernel_path(**pinned):
    """The value pinned for this host's kernel path (kernels_path()). A greedy golden is exact on one
    path, but the paths round differently: the matmuls give the same bits on every path, while
    attention, the norms and the softmax sum in 8 lanes on AVX2 and 16 on AVX-512, which can move a
    near-tie of the model's logits (tests/model/test_kquant_golden.cpp has the measurement)."""
    path = kernels_path()
    assert path in pinned, f"no value pinned for the {path} kernel path (pinned: {sorted(pinned)})"
    return pinned[path]


# Qwen2.5-Coder-0.5B's greedy sentence after the weather tool's result, with an agent's system prompt
# and tool_choice "none": one conversation pinned by test_tools_qwen.py and, through their own
# protocols, test_anthropic_sdk.py and test_responses_sdk.py. Per kernel path (per_kernel_path).
QWEN_TOOL_RESULT_ANSWER = {
    "avx512": "The temperature in Paris today is 21 degrees Celsius and the sky is sunny.",
    "avx2": "The weather in Paris today is sunny with a temperature of 21 degrees Celsius.",
}


def model_path():
    env = os.environ.get("TESSERA_MODEL")
    if env:
        return env if os.path.exists(env) else None
    path = os.path.join(SOURCE_DIR, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.exists(path) else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, extra_args=(), model=None):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = f"/tmp/tessera_e2e_{self.port}.log"
        # Defaults a test may override by passing the flag itself (the CLI refuses a flag twice).
        defaults = {"--kv-cache": "128MiB", "--max-model-len": "1024",
                    "--shutdown-grace": str(round(5 * SLOWDOWN))}
        args = [tessera_bin(), "serve", "--model", model or model_path(), "--port", str(self.port), "--host", "127.0.0.1",
                "--served-model-name", SERVED_NAME,
                *[x for flag, value in defaults.items() if flag not in extra_args for x in (flag, value)], *extra_args]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tessera serve exited with {self.proc.returncode}: {self.read_log()}")
            try:
                with urllib.request.urlopen(self.base + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:  # noqa: BLE001
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("tessera serve did not come up: " + self.read_log())

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()[-3000:]

    def sanitizer_report(self):
        with open(self.log_path, errors="replace") as f:
            return sanitizer_report(f.read())

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def require_environment():
    missing = ensure_openai()
    if missing:
        pytest.skip(missing)
    if tessera_bin() is None:
        pytest.skip("no tessera binary (build the `tessera` target or set TESSERA_BIN)")
    if model_path() is None:
        pytest.skip("the default model is missing (run scripts/setup.sh or set TESSERA_MODEL)")


@pytest.fixture(scope="session")
def server():
    require_environment()
    s = Server()
    yield s
    code = s.stop()
    assert s.sanitizer_report() is None, f"tessera serve (exit {code}):\n{s.sanitizer_report()}"
    assert code == 0, f"tessera serve exited with {code} after SIGTERM: {s.read_log()}"


@pytest.fixture(scope="session")
def client(server):
    import openai
    return openai.OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0, timeout=300)


# The second model the e2e tests use (tools, its own chat template, structured outputs): installed by
# scripts/fetch_models.sh; the tests that need it skip when it is absent.
QWEN_MODEL = os.path.join(SOURCE_DIR, "models", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")


@pytest.fixture(scope="session")
def qwen_server():
    require_environment()
    if not os.path.exists(QWEN_MODEL):
        pytest.skip(f"{QWEN_MODEL} is missing (scripts/fetch_models.sh)")
    s = Server(model=QWEN_MODEL)
    yield s
    code = s.stop()
    assert s.sanitizer_report() is None, f"tessera serve (exit {code}):\n{s.sanitizer_report()}"
    assert code == 0, f"tessera serve exited with {code} after SIGTERM: {s.read_log()}"


@pytest.fixture(scope="session")
def qwen_client(qwen_server):
    import openai
    return openai.OpenAI(base_url=qwen_server.base + "/v1", api_key="unused", max_retries=0, timeout=600)


@pytest.fixture
def start_server():
    """Starts extra servers (auth, shutdown tests); stops whatever is left at the end."""
    require_environment()
    started = []

    def start(*extra_args, model=None):
        s = Server(extra_args, model=model)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()
    # Whatever a test made of the exit, a sanitizer report in any server's output fails it.
    reports = [f"tessera serve on port {s.port} (exit {s.proc.returncode}):\n{s.sanitizer_report()}"
               for s in started if s.sanitizer_report()]
    assert not reports, "\n\n".join(reports)


def http(base, method, path, body=None, headers=None, timeout=120):
    """Raw HTTP: returns (status, parsed JSON or text)."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers=headers or {})
    if data is not None and "Content-Type" not in (headers or {}):
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode("utf-8", "replace")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def metrics(base):
    """Prometheus text -> {name: value} for the unlabeled-by-extra-label series."""
    _, text = http(base, "GET", "/metrics")
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0]
        if "le=" in name_labels or "position=" in name_labels:
            continue
        out[name] = float(value)
    return out


def named_sse_events(base, path, body, headers=None):
    """[(event name, data)] of a named-event SSE stream (Anthropic's and the Responses API's
    `event: NAME` / `data: JSON` blocks), POSTing `body` as JSON to base + path."""
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=300) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = []
    for block in raw.split("\n\n"):
        lines = block.split("\n")
        if len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: "):
            events.append((lines[0][7:], json.loads(lines[1][6:])))
    return events
