"""What the model is fed, seen through `tessera serve`: POST /apply-template with a chat body returns
exactly the text Python's jinja2 renders from the GGUF's own chat template (the goldens in
tests/data/jinja/goldens.json, written by scripts/gen_jinja_goldens.py), for the pinned
conversations there (system prompt, multi-turn, unicode, tools offered, tool calls and results,
chat_template_kwargs), and its tokens are the tokenizer's ids for that text. POST /tokenize with
`messages` gives the same ids for the conversations it takes (role + content).

Both GGUFs with a template: SmolLM2-135M (the default server) and Qwen2.5-Coder-0.5B (its own
server; skipped when the file is absent). When jinja2 is installed, the golden is also re-rendered
live from tests/data/jinja/templates/<name>.jinja, so a stale golden file cannot hide a change.
"""
import json
import os
import sys

import pytest

from conftest import SOURCE_DIR, http

GOLDENS = os.path.join(SOURCE_DIR, "tests", "data", "jinja", "goldens.json")
# /tokenize's `messages` are role + content only; these conversations have nothing else.
PLAIN = {"system_user", "user_only", "multi_turn", "unicode_spaces", "reasoning_history"}


def golden_cases(template):
    with open(GOLDENS) as f:
        cases = [c for c in json.load(f)["cases"] if c["template"] == template]
    # /apply-template always appends the generation prompt, as /v1/chat/completions does.
    return [c for c in cases if c["context"]["add_generation_prompt"]]


def body_of(context):
    body = {"messages": context["messages"]}
    if "tools" in context:
        body["tools"] = context["tools"]
    kwargs = {k: v for k, v in context.items()
              if k not in ("messages", "tools", "add_generation_prompt", "bos_token", "eos_token")}
    if kwargs:
        body["chat_template_kwargs"] = kwargs
    return body


def live_jinja2(template, context):
    """The template rendered now by jinja2 (None without jinja2)."""
    try:
        sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))
        import gen_jinja_goldens as gen
    except ImportError:
        return None
    finally:
        sys.path.pop(0)
    with open(os.path.join(SOURCE_DIR, "tests", "data", "jinja", "templates", template + ".jinja")) as f:
        return gen.environment().from_string(f.read()).render(**context)


def check_template(base, case):
    body = body_of(case["context"])
    status, got = http(base, "POST", "/apply-template", body)
    if "error" in case:  # jinja2 raised for this conversation: so must tessera, as a 400
        assert status == 400, got
        assert got["error"]["message"].startswith("Cannot apply the chat template"), got
        return
    assert status == 200, got
    assert got["prompt"] == case["output"]
    live = live_jinja2(case["template"], case["context"])
    if live is not None:
        assert live == case["output"], "goldens.json is stale: rerun scripts/gen_jinja_goldens.py"
    # The ids are the tokenizer's for exactly that text.
    status, tok = http(base, "POST", "/tokenize", {"prompt": case["output"]})
    assert status == 200, tok
    assert got["tokens"] == tok["tokens"] and got["count"] == len(tok["tokens"])
    if case["conversation"] in PLAIN:
        status, tok = http(base, "POST", "/tokenize", {"messages": case["context"]["messages"]})
        assert status == 200, tok
        assert tok["tokens"] == got["tokens"]


@pytest.mark.parametrize("case", golden_cases("gguf-smollm2"), ids=lambda c: c["conversation"])
def test_apply_template_smollm2_equals_jinja2(server, case):
    check_template(server.base, case)


@pytest.mark.parametrize("case", golden_cases("gguf-qwen2.5-coder"), ids=lambda c: c["conversation"])
def test_apply_template_qwen_equals_jinja2(qwen_server, case):
    check_template(qwen_server.base, case)


def test_pinned_qwen_tool_conversation(qwen_server):
    # One conversation written out, so the exact bytes are visible here too.
    (case,) = [c for c in golden_cases("gguf-qwen2.5-coder") if c["conversation"] == "tool_call_and_result"]
    status, got = http(qwen_server.base, "POST", "/apply-template", body_of(case["context"]))
    assert status == 200, got
    assert got["prompt"].endswith(
        "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n"
        "<|im_start|>assistant\n<tool_call>\n"
        "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n{\"temperature\": 22, \"sky\": \"clear\"}\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"), got["prompt"]
    assert got["prompt"] == case["output"]
