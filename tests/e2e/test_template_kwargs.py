"""chat_template_kwargs and reasoning through a GGUF's own template, end to end. SmolLM2-135M is
copied with its tokenizer.chat_template replaced by a thinking model's real template (from
tests/data/jinja/templates), as a file of that family carries it:

- Qwen3-0.6B's: /apply-template with chat_template_kwargs {"enable_thinking": false} returns
  exactly jinja2's rendering with the empty think block (golden "thinking_off"), without it the
  plain generation prompt (golden "user_only"); /v1/chat/completions with those kwargs is fed that
  prompt (its usage.prompt_tokens equals /apply-template's count, and differs from the request
  without them).
- DeepSeek-R1-Distill-Qwen's: its generation prompt opens "<think>\\n", so the output is reasoning
  until "</think>": cut by max_tokens before one, all of it is reasoning_content, content empty;
  streamed, the same text as reasoning_content deltas; "separate_reasoning": false gives it as
  content.
"""
import json
import os

import pytest

from conftest import SOURCE_DIR, SERVED_NAME, Server, http, model_path, require_environment
from gguf_file import with_string_value

JINJA = os.path.join(SOURCE_DIR, "tests", "data", "jinja")
QWEN3, R1 = "Qwen-Qwen3-0.6B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"


def golden(template, conversation):
    with open(os.path.join(JINJA, "goldens.json")) as f:
        (case,) = [c for c in json.load(f)["cases"] if (c["template"], c["conversation"]) == (template, conversation)]
    return case


@pytest.fixture(scope="module")
def templated(tmp_path_factory):
    """template name -> a server on SmolLM2 carrying that chat template."""
    require_environment()
    servers = {}
    try:
        for name in (QWEN3, R1):
            path = str(tmp_path_factory.mktemp("gguf") / f"smollm2-{name}.gguf")
            with open(os.path.join(JINJA, "templates", name + ".jinja")) as f:
                with_string_value(model_path(), path, "tokenizer.chat_template", f.read())
            servers[name] = Server(model=path)
        yield servers
    finally:
        for s in servers.values():
            code = s.stop()
            assert s.sanitizer_report() is None and code == 0, s.read_log()


def test_enable_thinking_reaches_the_template(templated):
    base = templated[QWEN3].base
    off, plain = golden(QWEN3, "thinking_off"), golden(QWEN3, "user_only")
    assert off["context"]["enable_thinking"] is False
    assert off["output"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    st, got = http(base, "POST", "/apply-template",
                   {"messages": off["context"]["messages"], "chat_template_kwargs": {"enable_thinking": False}})
    assert st == 200 and got["prompt"] == off["output"], got
    st, got_plain = http(base, "POST", "/apply-template", {"messages": plain["context"]["messages"]})
    assert st == 200 and got_plain["prompt"] == plain["output"], got_plain

    def prompt_tokens(**extra):
        st, r = http(base, "POST", "/v1/chat/completions",
                     {"model": SERVED_NAME, "messages": off["context"]["messages"], "max_tokens": 1, "temperature": 0, **extra})
        assert st == 200, r
        return r["usage"]["prompt_tokens"]
    assert prompt_tokens(chat_template_kwargs={"enable_thinking": False}) == got["count"]
    st, thinking = http(base, "POST", "/apply-template", {"messages": off["context"]["messages"]})
    assert prompt_tokens() == thinking["count"] < got["count"]


def test_prompt_that_opens_think_makes_the_output_reasoning(templated):
    base = templated[R1].base
    closed = {"model": SERVED_NAME, "messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 12,
              "temperature": 0}
    body = dict(closed, chat_template_kwargs={"enable_thinking": True})
    st, tpl = http(base, "POST", "/apply-template", body)
    assert st == 200 and tpl["prompt"].endswith("<｜Assistant｜><think>\n"), tpl
    st, tpl_closed = http(base, "POST", "/apply-template", closed)
    assert st == 200 and tpl_closed["prompt"].endswith("<｜Assistant｜><think>\n</think>"), tpl_closed

    st, raw = http(base, "POST", "/v1/chat/completions", dict(body, separate_reasoning=False))
    assert st == 200, raw
    text = raw["choices"][0]["message"]["content"]
    assert text and "</think>" not in text and raw["choices"][0]["finish_reason"] == "length"
    st, split = http(base, "POST", "/v1/chat/completions", body)
    message = split["choices"][0]["message"]
    assert message["reasoning_content"] == text and not message.get("content")
    import openai
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    reasoning, content = "", ""
    for chunk in client.chat.completions.create(stream=True, extra_body={"chat_template_kwargs": {"enable_thinking": True}},
                                                **closed):
        if chunk.choices:
            reasoning += getattr(chunk.choices[0].delta, "reasoning_content", None) or ""
            content += chunk.choices[0].delta.content or ""
    assert (reasoning, content) == (text, "")
    # The prompt closed the block: the output is the answer.
    st, answer = http(base, "POST", "/v1/chat/completions", closed)
    assert st == 200 and "reasoning_content" not in answer["choices"][0]["message"], answer
    assert answer["choices"][0]["message"]["content"]
