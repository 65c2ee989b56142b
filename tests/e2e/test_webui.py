"""The chat page at / of `tessera serve` (src/server/webui/index.html), driven in a real browser:
Debian's chromium + chromium-driver through Selenium (PyPI `selenium`), headless. The page's
answers are compared with the server's own greedy /v1/chat/completions answers for the same
messages, so a page that lost a delta, sent the wrong history or dropped the system prompt fails.

Needs (scripts/setup.sh installs them): apt chromium chromium-driver, pip selenium; the tests skip
with a message when they are missing.
"""
import os
import re
import time
import urllib.request

import pytest

from conftest import SERVED_NAME, SLOWDOWN, http, metrics, per_kernel_path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT_S = 120 * SLOWDOWN


def make_browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("the selenium Python package is missing (scripts/setup.sh installs it)")
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            pytest.skip(f"{path} is missing (scripts/setup.sh installs chromium and chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,860",
                "--force-prefers-reduced-motion"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


@pytest.fixture(scope="module")
def browser():
    b = make_browser()
    yield b
    b.quit()


def wait_for(b, condition, what, timeout=WAIT_S):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(b, timeout, poll_frequency=0.05).until(lambda d: condition(d), message=what)


def by_id(b, id_):
    from selenium.webdriver.common.by import By
    return b.find_element(By.ID, id_)


def open_page(b, base, ready=True):
    b.get(base + "/")
    if ready:
        wait_for(b, lambda d: by_id(d, "model").get_attribute("data-ready") == "1", "the model card shown")


def set_field(b, id_, value):
    el = by_id(b, id_)
    el.clear()
    if value:
        el.send_keys(value)


def answers(b):
    from selenium.webdriver.common.by import By
    return b.find_elements(By.CSS_SELECTOR, "#messages .msg.assistant")


def send(b, text):
    """Types `text` and presses Send; returns once the answer's box exists."""
    before = len(answers(b))
    set_field(b, "input", text)
    by_id(b, "send").click()
    wait_for(b, lambda d: len(answers(d)) == before + 1, "an answer box")
    return answers(b)[-1]


def wait_done(b, box, state="done"):
    wait_for(b, lambda d: box.get_attribute("data-state") != "streaming", "the answer to end")
    assert box.get_attribute("data-state") == state, box.text
    return box.get_attribute("data-raw")


def greedy(base, messages, max_tokens, headers=None):
    status, body = http(base, "POST", "/v1/chat/completions",
                        {"model": SERVED_NAME, "messages": messages, "temperature": 0, "max_tokens": max_tokens},
                        headers=headers)
    assert status == 200, body
    return body["choices"][0]["message"]["content"]


def get_raw(base, path, method="GET"):
    req = urllib.request.Request(base + path, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def test_page_is_served_with_a_strict_policy(server):
    status, headers, body = get_raw(server.base, "/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Cache-Control"] == "no-cache"
    csp = headers["Content-Security-Policy"]
    nonce = re.fullmatch(r"default-src 'none'; script-src 'nonce-([0-9a-f]{32})'; style-src 'nonce-\1'; "
                         r"connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; "
                         r"frame-ancestors 'none'", csp).group(1)
    # The page's own two tags carry this response's nonce; nothing else is left of the placeholder.
    assert body.count(f'nonce="{nonce}"') == 2 and "__TESSERA_CSP_NONCE__" not in body
    assert body.startswith("<!doctype html>") and "</html>" in body
    status2, headers2, body2 = get_raw(server.base, "/index.html")
    assert status2 == 200 and headers2["Content-Security-Policy"] != csp  # a fresh nonce per response
    assert body2.replace(headers2["Content-Security-Policy"].split("'nonce-")[1][:32], nonce) == body
    status, headers, got = get_raw(server.base, "/", method="POST")
    assert status == 405 and headers["Allow"] == "GET" and "not allowed" in got


def test_no_webui_turns_the_page_off(start_server):
    s = start_server("--no-webui")
    for path in ("/", "/index.html"):
        status, got = http(s.base, "GET", path)
        assert status == 404 and got["error"]["message"] == f"Unknown route: GET {path}"
    assert http(s.base, "GET", "/v1/models")[0] == 200


def test_page_shows_the_model_and_streams_an_answer(server, browser):
    b = browser
    open_page(b, server.base)
    assert by_id(b, "model").text == f"{SERVED_NAME} · context 1024 tokens"
    assert not by_id(b, "keybox").is_displayed()  # no API key on this server: never asked
    set_field(b, "temperature", "0")
    set_field(b, "max_tokens", "64")
    # Record the answer's length (its raw text, updated with each render) at every change, to see it
    # grow while streaming.
    b.execute_script("""
        window.__lengths = [];
        new MutationObserver((records) => {
          for (const r of records) window.__lengths.push((r.target.dataset.raw || '').length);
        }).observe(document.getElementById('messages'), {subtree: true, attributeFilter: ['data-raw']});""")
    prompt = "Write a long story about a dragon who learns to cook."
    box = send(b, prompt)
    assert by_id(b, "stop").is_enabled() and not by_id(b, "send").is_enabled()
    raw = wait_done(b, box)
    assert raw == greedy(server.base, [{"role": "user", "content": prompt}], 64)
    lengths = [n for n in b.execute_script("return window.__lengths") if n > 0]
    assert len(set(lengths)) >= 5 and lengths == sorted(lengths), lengths  # grew in steps, never shrank
    stats = box.find_element("css selector", ".stats").text
    assert re.fullmatch(r"TTFT \d+ ms · \d+\.\d tok/s · 64 tokens · length", stats), stats
    assert by_id(b, "send").is_enabled() and not by_id(b, "stop").is_enabled()


def test_stop_ends_a_long_answer_and_the_page_stays_usable(server, browser):
    b = browser
    open_page(b, server.base)
    set_field(b, "temperature", "0")
    set_field(b, "max_tokens", "900")
    aborted = metrics(server.base).get("tessera:request_aborted_total", 0)
    box = send(b, "Count from 1 to 1000, one number per line.")
    wait_for(b, lambda d: len(box.get_attribute("data-raw") or "") > 40, "some of the answer")
    by_id(b, "stop").click()
    wait_done(b, box, state="stopped")
    stopped_at = box.get_attribute("data-raw")
    time.sleep(1.0)
    assert box.get_attribute("data-raw") == stopped_at  # no longer growing
    assert box.find_element("css selector", ".note").text == "stopped"
    assert by_id(b, "send").is_enabled() and not by_id(b, "stop").is_enabled()
    # The server saw the client go and aborted the request (not 900 tokens generated for nobody).
    wait_for(b, lambda d: metrics(server.base).get("tessera:request_aborted_total", 0) == aborted + 1,
             "the server to abort the request", timeout=10 * SLOWDOWN)
    set_field(b, "max_tokens", "8")
    assert len(wait_done(b, send(b, "Hello"))) > 0


def test_multi_turn_and_new_chat(server, browser):
    b = browser
    open_page(b, server.base)
    set_field(b, "temperature", "0")
    set_field(b, "max_tokens", "40")
    first = "What is the capital of France?"
    a1 = wait_done(b, send(b, first))
    assert a1 == greedy(server.base, [{"role": "user", "content": first}], 40)
    second = "And of Italy?"
    a2 = wait_done(b, send(b, second))
    # The whole conversation went with the second turn.
    assert a2 == greedy(server.base, [{"role": "user", "content": first}, {"role": "assistant", "content": a1},
                                      {"role": "user", "content": second}], 40)
    by_id(b, "new-chat").click()
    assert b.execute_script("return document.getElementById('messages').children.length") == 0
    a3 = wait_done(b, send(b, second))
    assert a3 == greedy(server.base, [{"role": "user", "content": second}], 40)  # nothing of the old chat


def test_system_prompt_takes_effect(server, browser):
    b = browser
    open_page(b, server.base)
    system = "You are a pirate. Always talk like a pirate."
    question = "Who are you?"
    set_field(b, "system", system)
    set_field(b, "temperature", "0")
    set_field(b, "max_tokens", "40")
    got = wait_done(b, send(b, question))
    want = greedy(server.base, [{"role": "system", "content": system}, {"role": "user", "content": question}], 40)
    assert got == want
    assert want != greedy(server.base, [{"role": "user", "content": question}], 40)  # the system prompt mattered


def test_api_key_is_asked_for_and_used(start_server, browser):
    b = browser
    key = "webui-secret-51"
    s = start_server("--api-key", key)
    status, headers, _ = get_raw(s.base, "/")
    assert status == 200  # the page itself needs no key
    open_page(b, s.base, ready=False)
    wait_for(b, lambda d: by_id(d, "keybox").is_displayed(), "the API key prompt")
    assert by_id(b, "keymsg").text == "This server requires an API key (tessera serve --api-key)."
    set_field(b, "apikey", "wrong-key")
    by_id(b, "keysave").click()
    wait_for(b, lambda d: by_id(d, "keybox").is_displayed() and "not accepted" in by_id(d, "keymsg").text,
             "the prompt again after a wrong key")
    set_field(b, "apikey", key)
    by_id(b, "keysave").click()
    wait_for(b, lambda d: by_id(d, "model").get_attribute("data-ready") == "1", "the model card")
    assert not by_id(b, "keybox").is_displayed()
    set_field(b, "temperature", "0")
    set_field(b, "max_tokens", "16")
    got = wait_done(b, send(b, "Hello"))
    assert got == greedy(s.base, [{"role": "user", "content": "Hello"}], 16, headers={"Authorization": f"Bearer {key}"})
    assert b.execute_script("return localStorage.getItem('tessera.apiKey')") == key
    # A key that stops working (the server restarted with another) is asked for again on send.
    b.execute_script("localStorage.setItem('tessera.apiKey', 'stale')")
    set_field(b, "input", "Hello again")
    by_id(b, "send").click()
    wait_for(b, lambda d: by_id(d, "keybox").is_displayed() and "not accepted" in by_id(d, "keymsg").text,
             "the prompt after a stale key")
    set_field(b, "apikey", key)
    by_id(b, "keysave").click()
    wait_for(b, lambda d: len(answers(d)) == 2, "the retried turn")
    assert len(wait_done(b, answers(b)[-1])) > 0


# A greedy SmolLM2 answer that contains live-looking HTML outside any code block: it echoes
# `<script>` and `<img src=x onerror=...>` in a paragraph, each of which would set window.xssPwned.
ECHO_SYSTEM = "You are an echo bot. You repeat the user's message exactly, character for character, and nothing else."
XSS_SCRIPT = "<script>window.xssPwned = 1</script>"
XSS_IMG = '<img src=x onerror="window.xssPwned = 2">'
XSS_PAYLOAD = XSS_SCRIPT + XSS_IMG


def test_model_html_is_shown_as_text(server, browser):
    from selenium.common.exceptions import NoAlertPresentException
    b = browser
    open_page(b, server.base)
    set_field(b, "system", ECHO_SYSTEM)
    set_field(b, "temperature", "0")
    set_field(b, "max_tokens", "60")
    box = send(b, XSS_PAYLOAD)
    raw = wait_done(b, box)
    # Tags the model wrote, outside any code block, pinned per kernel path (conftest.per_kernel_path):
    # on AVX-512 the payload itself; on AVX2 it parts at a near-tie and writes the <img> as a second
    # <script> ("The original user's message is: <script>...1</script> The echo bot's response is:
    # <script>...2</script>").
    tags = re.findall(r"<script>.*?</script>|<img [^>]*>", raw)
    expected = per_kernel_path(avx512=[XSS_SCRIPT, XSS_IMG], avx2=[XSS_SCRIPT, XSS_SCRIPT.replace("1", "2")])
    assert all(tag in tags for tag in expected) and "```" not in raw, raw
    shown = box.find_element("css selector", ".content").text
    assert all(tag in shown for tag in tags), shown  # visible as text
    assert b.execute_script("return document.querySelectorAll('#messages script, #messages img, #messages [onerror]').length") == 0
    assert b.execute_script("return typeof window.xssPwned") == "undefined"
    with pytest.raises(NoAlertPresentException):
        b.switch_to.alert.text  # noqa: B018


# renderMarkdown(text) -> HTML, pinned: escaping first, then only the renderer's own tags.
MARKDOWN_CASES = [
    ("plain <b>bold</b> & 'q' \"d\"", "<p>plain &lt;b&gt;bold&lt;/b&gt; &amp; &#39;q&#39; &quot;d&quot;</p>"),
    ("# Title\n\nSome **bold**, *it*, _it2_ and `a<b>`.",
     "<h1>Title</h1><p>Some <strong>bold</strong>, <em>it</em>, <em>it2</em> and <code>a&lt;b&gt;</code>.</p>"),
    ("```html\n<script>alert(1)</script>\n```", '<pre><code class="lang-html">&lt;script&gt;alert(1)&lt;/script&gt;</code></pre>'),
    ("```\nunclosed <i>", "<pre><code>unclosed &lt;i&gt;</code></pre>"),
    ("- a\n- b\n\n1. one\n2. two", "<ul><li>a</li><li>b</li></ul><ol><li>one</li><li>two</li></ol>"),
    ("[ok](https://example.com/a?b=1&c=2) [bad](javascript:alert(1)) [x](http://e.org/\"onmouseover=\"y)",
     '<p><a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">ok</a> '
     '[bad](javascript:alert(1)) <a href="http://e.org/&quot;onmouseover=&quot;y" target="_blank" '
     'rel="noopener noreferrer">x</a></p>'),
    ("line one\nline two\n\nnext", "<p>line one<br>line two</p><p>next</p>"),
    ("<img src=x onerror=alert(1)>", "<p>&lt;img src=x onerror=alert(1)&gt;</p>"),
    ("snake_case_name and 2*3*4", "<p>snake_case_name and 2*3*4</p>"),
]


def test_markdown_renderer_escapes_then_formats(server, browser):
    b = browser
    open_page(b, server.base, ready=False)
    for text, want in MARKDOWN_CASES:
        assert b.execute_script("return renderMarkdown(arguments[0])", text) == want, text


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def test_tool_calls_from_the_tools_field(server, browser):
    import json
    from selenium.webdriver.support.ui import Select
    b = browser
    open_page(b, server.base)
    set_field(b, "temperature", "0")
    set_field(b, "max_tokens", "60")
    set_field(b, "tools", json.dumps([WEATHER_TOOL]))
    Select(by_id(b, "tool_choice")).select_by_visible_text("required")
    question = "What is the weather in Paris?"
    box = send(b, question)
    wait_done(b, box)
    status, want = http(server.base, "POST", "/v1/chat/completions",
                        {"messages": [{"role": "user", "content": question}], "temperature": 0, "max_tokens": 60,
                         "tools": [WEATHER_TOOL], "tool_choice": "required"})
    assert status == 200, want
    call = want["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "get_weather"
    shown = [e.text for e in box.find_elements("css selector", ".tool-calls pre")]
    assert shown == [f"{call['name']}({call['arguments']})"]
    assert box.find_element("css selector", ".stats").text.endswith(" · tool_calls")
    # The call is part of the conversation: the next turn sends it back and is answered.
    Select(by_id(b, "tool_choice")).select_by_visible_text("none")
    assert len(wait_done(b, send(b, "Thanks. Say OK."))) > 0


def test_reasoning_and_tool_calls_are_shown(server, browser):
    # SmolLM2 writes neither, so the page's own chunk handler is fed the deltas a reasoning model
    # and a tool call stream send (the shapes of chat_output.cpp), split mid-word as the server may.
    b = browser
    open_page(b, server.base)
    b.execute_script("""
        const t = addAssistantView();
        for (const d of [{reasoning_content: 'The user <b>wants</b>'}, {reasoning_content: ' the weather.'},
                         {tool_calls: [{index: 0, id: 'call_1', type: 'function', function: {name: 'get_weather', arguments: ''}}]},
                         {tool_calls: [{index: 0, function: {arguments: '{"city": '}}]},
                         {tool_calls: [{index: 0, function: {arguments: '"Paris"}'}}]}])
          onChunk(t, {choices: [{index: 0, delta: d, finish_reason: null}]});
        onChunk(t, {choices: [{index: 0, delta: {}, finish_reason: 'tool_calls'}]});
        onChunk(t, {choices: [], usage: {prompt_tokens: 9, completion_tokens: 12, total_tokens: 21}});
        finishTurn(t, 'done');""")
    box = answers(b)[-1]
    details = box.find_element("css selector", "details.reasoning")
    assert details.get_attribute("open") is None  # collapsed
    details.find_element("css selector", "summary").click()
    assert details.find_element("css selector", ".reasoning-text").text == "The user <b>wants</b> the weather."
    assert box.find_element("css selector", ".tool-calls pre").text == 'get_weather({"city": "Paris"})'
    assert box.find_element("css selector", ".stats").text.endswith(" · 12 tokens · tool_calls")
    assert b.execute_script("return JSON.stringify(history)") == (
        '[{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function",'
        '"function":{"name":"get_weather","arguments":"{\\"city\\": \\"Paris\\"}"}}]}]')
