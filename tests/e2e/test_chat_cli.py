"""`tessera chat` end to end: through a pipe (one message per line, each answer and a newline on
stdout) its greedy answers equal the server's /v1/chat/completions answers for the same
conversation, turn after turn; /system, /clear, /save and /load change the conversation as the
server's messages say; the second turn's prompt comes from the prefix cache (/stats). Through a
pseudo-terminal: Ctrl-C stops an answer mid-stream, the prompt comes back and the next message is
answered; Ctrl-C at the prompt and Ctrl-D leave with exit status 0."""
import json
import os
import pty
import re
import select
import signal
import subprocess
import time

import pytest

from conftest import SERVED_NAME, SLOWDOWN, model_path, require_environment, tessera_bin

MAX_TOKENS = 24
BLOCK_SIZE = 16  # the engine's default KV block size
# The chat's engine like the server fixture's (conftest.Server), so the same prompts fit.
ENGINE_FLAGS = ["--kv-cache", "128MiB", "--max-model-len", "1024"]
U1 = "Hello! Who are you?"
U2 = "What can you help me with?"
SYSTEM = "You are Captain Hook, a pirate."


@pytest.fixture(scope="module", autouse=True)
def environment():
    require_environment()


def chat_cmd(*extra, max_tokens=MAX_TOKENS, engine_flags=ENGINE_FLAGS):
    return [tessera_bin(), "chat", "--model", model_path(), *engine_flags, "--temperature", "0",
            "-n", str(max_tokens), *extra]


def chat_pipe(lines, *extra, expect_rc=0):
    """Runs `tessera chat` with `lines` on stdin; returns its stdout."""
    p = subprocess.run(chat_cmd(*extra), input="".join(line + "\n" for line in lines), capture_output=True,
                       text=True, timeout=300 * SLOWDOWN)
    assert p.returncode == expect_rc, p.stderr
    assert "\x1b[" not in p.stdout  # no ANSI codes through a pipe
    return p.stdout


def server_answer(client, messages, max_tokens=MAX_TOKENS):
    r = client.chat.completions.create(model=SERVED_NAME, messages=messages, max_tokens=max_tokens, temperature=0)
    return r.choices[0].message.content


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def test_two_turns_equal_the_server(client):
    a1 = server_answer(client, [user(U1)])
    a2 = server_answer(client, [user(U1), assistant(a1), user(U2)])
    assert a1 and a2
    assert chat_pipe([U1, U2]) == a1 + "\n" + a2 + "\n"


def test_multi_line_input_is_one_message(client):
    expected = server_answer(client, [user("Name two colours.\nAnd one animal.")])
    assert chat_pipe(['"""', "Name two colours.", "And one animal.", '"""']) == expected + "\n"
    assert chat_pipe(["Name two colours.\\", "And one animal."]) == expected + "\n"


def test_system_and_clear_take_effect(client):
    a1 = server_answer(client, [user(U1)])
    # /system mid-conversation: the next turn is rendered with it in front of the history.
    a2 = server_answer(client, [{"role": "system", "content": SYSTEM}, user(U1), assistant(a1), user(U2)])
    # /clear forgets the turns and keeps the system prompt: a fresh single turn.
    a3 = server_answer(client, [{"role": "system", "content": SYSTEM}, user(U2)])
    assert a2 != server_answer(client, [user(U1), assistant(a1), user(U2)])  # the system prompt matters
    out = chat_pipe([U1, "/system " + SYSTEM, U2, "/clear", U2])
    assert out == a1 + "\n" + a2 + "\n" + a3 + "\n"
    # Without a system prompt, /clear leaves a fresh single-turn conversation.
    assert chat_pipe([U1, "/clear", U2]) == a1 + "\n" + server_answer(client, [user(U2)]) + "\n"


STATS = re.compile(r"last answer: (\d+) tokens, TTFT [\d.]+ ms, [\d.]+ tok/s\n"
                   r"last prompt: (\d+) tokens, (\d+) served from the prefix cache\n"
                   r"session: (\d+) answers?, (\d+) prompt tokens, (\d+) served from the prefix cache "
                   r"\(hit rate ([\d.]+)%\)\n")


def test_second_turn_prompt_comes_from_the_prefix_cache(client):
    r1 = client.chat.completions.create(model=SERVED_NAME, messages=[user(U1)], max_tokens=MAX_TOKENS, temperature=0)
    a1 = r1.choices[0].message.content
    r2 = client.chat.completions.create(model=SERVED_NAME, messages=[user(U1), assistant(a1), user(U2)],
                                        max_tokens=MAX_TOKENS, temperature=0)
    a2 = r2.choices[0].message.content
    out = chat_pipe([U1, "/stats", U2, "/stats"])
    assert out.startswith(a1 + "\n")
    first = STATS.search(out)
    second = STATS.search(out, first.end())
    assert first and second, out
    assert out[first.end():second.start()] == a2 + "\n"
    n1, p1, c1, answers1, total1, cached1, _ = (float(x) for x in first.groups())
    n2, p2, c2, answers2, total2, cached2, rate = (float(x) for x in second.groups())
    assert (n1, n2) == (r1.usage.completion_tokens, r2.usage.completion_tokens)
    assert (p1, p2) == (r1.usage.prompt_tokens, r2.usage.prompt_tokens)
    assert c1 == 0  # a fresh engine
    # The second prompt starts with the first prompt and its answer: at least the first prompt's
    # whole KV blocks are served from the cache.
    assert c2 > 0 and c2 >= (p1 // BLOCK_SIZE) * BLOCK_SIZE
    assert (answers1, total1, cached1) == (1, p1, 0)
    assert (answers2, total2, cached2) == (2, p1 + p2, c2)
    assert rate == pytest.approx(100 * c2 / (p1 + p2), abs=0.05)


def test_a_turn_that_cannot_fit_is_refused_and_the_chat_goes_on(client):
    long_message = " ".join(["word"] * 80)
    p = subprocess.run(chat_cmd("--max-model-len", "96", engine_flags=["--kv-cache", "64MiB"]),
                       input=f"{long_message}\n{U1}\n", capture_output=True, text=True, timeout=300 * SLOWDOWN)
    assert p.returncode == 1  # from a pipe, a failed turn makes the exit status 1
    assert re.search(r"error: the conversation \(\d+ tokens\) fills the context of 96 tokens: /clear starts over",
                     p.stderr), p.stderr
    # The refused turn is not in the history: the next one is a fresh single turn.
    assert p.stdout == server_answer(client, [user(U1)]) + "\n"


def test_save_then_load_round_trips(client, tmp_path):
    path = tmp_path / "conversation.json"
    a1 = server_answer(client, [{"role": "system", "content": SYSTEM}, user(U1)])
    a2 = server_answer(client, [{"role": "system", "content": SYSTEM}, user(U1), assistant(a1), user(U2)])
    out = chat_pipe(["/system " + SYSTEM, U1, f"/save {path}", "/clear", "/system", f"/load {path}", U2])
    assert out == a1 + "\n" + a2 + "\n"
    assert json.loads(path.read_text()) == [{"role": "system", "content": SYSTEM}, user(U1), assistant(a1)]
    # A bad file: an error on stderr, exit status 1 from a pipe, the conversation untouched.
    path.write_text('[{"role": "user"}]')
    p = subprocess.run(chat_cmd(), input=f"/load {path}\n{U1}\n", capture_output=True, text=True,
                       timeout=300 * SLOWDOWN)
    assert p.returncode == 1
    assert f"/load: message 0 of '{path}' is not an object" in p.stderr
    assert p.stdout == server_answer(client, [user(U1)]) + "\n"


class Terminal:
    """`tessera chat` on a pseudo-terminal: what it writes is read back as a user would see it."""

    def __init__(self, max_tokens=MAX_TOKENS):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its controlling terminal, Ctrl-C its SIGINT
            os.execv(tessera_bin(), chat_cmd(max_tokens=max_tokens))
        self.seen = ""

    def read_until(self, text, timeout=120 * SLOWDOWN):
        """Reads until `text` shows up after what was consumed; returns what came before it."""
        deadline = time.time() + timeout
        while text not in self.seen:
            left = deadline - time.time()
            assert left > 0, f"no {text!r} in {self.seen!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                assert chunk, f"the chat ended before {text!r}: {self.seen!r}"
                self.seen += chunk.decode("utf-8", "replace")
        before, self.seen = self.seen.split(text, 1)
        return before

    def send(self, data):
        os.write(self.fd, data.encode())

    def wait(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            try:
                os.read(self.fd, 4096)  # keep the terminal drained
            except OSError:
                time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("tessera chat did not exit")


def test_ctrl_c_stops_an_answer_and_the_chat_goes_on(client, tmp_path):
    long_prompt = "Write a very long story about a dragon who learns to read."
    term = Terminal(max_tokens=900)
    term.read_until("/bye to leave.")
    term.read_until("> ")
    term.send(long_prompt + "\n")
    term.read_until(long_prompt + "\r\n")  # the terminal's echo
    partial = ""
    while len(partial) < 40:  # some of the answer, then Ctrl-C
        ready, _, _ = select.select([term.fd], [], [], 120 * SLOWDOWN)
        assert ready, partial
        partial += os.read(term.fd, 4096).decode("utf-8", "replace")
    term.send("\x03")
    term.read_until("[answer stopped]")
    term.read_until("> ")
    term.send("/set max_tokens 24\n")
    term.read_until("> ")
    term.send(U1 + "\n")
    term.read_until(U1 + "\r\n")
    second = term.read_until("\r\n> ")
    term.send("/stats\n")
    stats = term.read_until("\r\n> ")
    assert re.search(r"last answer: \d+ tokens, TTFT [\d.]+ ms, [\d.]+ tok/s\r\n", stats), stats
    saved = tmp_path / "after_ctrl_c.json"
    term.send(f"/save {saved}\n")
    term.read_until("> ")
    term.send("/bye\n")
    assert term.wait() == 0
    # The stopped answer is kept as far as it went: a prefix of the whole greedy answer, shorter
    # than the 900 tokens asked for; the next turn answers after it as the server does.
    messages = json.loads(saved.read_text())
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    stopped = messages[1]["content"]
    whole = server_answer(client, [user(long_prompt)], max_tokens=900)
    assert stopped and whole.startswith(stopped) and len(stopped) < len(whole)
    expected = server_answer(client, [user(long_prompt), assistant(stopped), user(U1)])
    assert messages[3]["content"] == expected
    assert second.replace("\r\n", "\n") == expected


@pytest.mark.parametrize("key", ["\x03", "\x04"])
def test_ctrl_c_or_ctrl_d_at_the_prompt_leaves(key):
    term = Terminal()
    term.read_until("/bye to leave.")
    term.read_until("> ")
    term.send(key)
    assert term.wait() == 0
