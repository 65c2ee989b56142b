#!/usr/bin/env python3
"""Renders real chat templates with Python's jinja2 the way Hugging Face transformers'
apply_chat_template does (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop
controls, tojson = json.dumps(ensure_ascii=False), raise_exception, strftime_now) and writes
tests/data/jinja/goldens.json. tests/jinja/test_jinja_goldens.cpp renders the same cases with
tessera's own Jinja engine and compares byte for byte (no Python needed there).

Templates: tests/data/jinja/templates/*.jinja, sources named in tests/data/jinja/sources.json
(the public model repositories' tokenizer_config.json chat_template), plus the chat templates
carried by the GGUF files the tests use (models/*.gguf, tokenizer.chat_template), written to
tests/data/jinja/templates/gguf-*.jinja when the models are present.

Every case is rendered for each conversation below; a case where jinja2 raises (the template
rejects the conversation, e.g. a system role it does not support) is stored as {"error": ...}
and tessera must raise too.

Usage: pip install jinja2 gguf; python3 scripts/gen_jinja_goldens.py
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIR = os.path.join(ROOT, "tests", "data", "jinja")
TEMPLATES = os.path.join(DIR, "templates")
# What strftime_now sees: 26 Jul 2024 12:00 local time (the C++ test passes the same instant).
NOW = datetime.datetime(2024, 7, 26, 12, 0, 0)

# The Gemma 3 270M GGUF has no tokenizer.chat_template (the family fallback renders it).
GGUFS = {
    "gguf-smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gguf-qwen2.5-coder": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "gguf-gemma3": "gemma-3-270m-q4_k_m.gguf",
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current local time in a time zone",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
    },
}

CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}
CALL2 = {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}}

CONVERSATIONS = {
    "system_user": {"messages": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is the capital of France?"},
    ]},
    "user_only": {"messages": [{"role": "user", "content": "Hello! How are you?"}]},
    "multi_turn": {"messages": [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Color of the sky?"},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "And grass?"},
    ]},
    "multi_turn_no_gen": {"add_generation_prompt": False, "messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello. How can I help?"},
    ]},
    "unicode_spaces": {"messages": [
        {"role": "user", "content": "  Grüße, 世界! 🦙 \"quotes\" {{ not jinja }} \n"},
    ]},
    "tools_offered": {"tools": [WEATHER_TOOL, TIME_TOOL], "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
    ]},
    "tool_call_and_result": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
         "content": "{\"temperature\": 22, \"sky\": \"clear\"}"},
    ]},
    # Mistral's templates (Nemo, Small 3.2) require 9-character alphanumeric call ids and raise on
    # "call_1": the same tool call and result with such an id, so they render one too.
    "tool_call_nine_char_id": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [dict(CALL, id="a1B2c3D4e")]},
        {"role": "tool", "tool_call_id": "a1B2c3D4e", "name": "get_weather", "content": "22 C, clear"},
        {"role": "assistant", "content": "It is 22 C and clear in Paris."},
        {"role": "user", "content": "And tomorrow?"},
    ]},
    "parallel_calls": {"tools": [WEATHER_TOOL, TIME_TOOL], "messages": [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL, CALL2]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "22 C"},
        {"role": "tool", "tool_call_id": "call_2", "name": "get_time", "content": "14:05"},
        {"role": "assistant", "content": "It is 22 C and 14:05 in Paris."},
        {"role": "user", "content": "Thanks!"},
    ]},
    "thinking_off": {"kwargs": {"enable_thinking": False}, "messages": [
        {"role": "user", "content": "2+2?"},
    ]},
    "reasoning_history": {"messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
        {"role": "user", "content": "3+3?"},
    ]},
}


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return NOW.strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def gguf_template(path):
    """(chat_template, bos, eos) from a GGUF file, or None."""
    try:
        from gguf import GGUFReader
    except ImportError:
        return None
    r = GGUFReader(path)

    def field(name):
        f = r.fields.get(name)
        return None if f is None else f.contents()

    tmpl = field("tokenizer.chat_template")
    tokens = field("tokenizer.ggml.tokens")
    bos_id, eos_id = field("tokenizer.ggml.bos_token_id"), field("tokenizer.ggml.eos_token_id")
    bos = tokens[bos_id] if tokens and bos_id is not None else ""
    eos = tokens[eos_id] if tokens and eos_id is not None else ""
    return tmpl, bos, eos


def main():
    with open(os.path.join(DIR, "sources.json")) as f:
        sources = json.load(f)
    for name, file in GGUFS.items():
        path = os.path.join(ROOT, "models", file)
        if os.path.exists(path):
            got = gguf_template(path)
            if got and got[0]:
                with open(os.path.join(TEMPLATES, name + ".jinja"), "w") as f:
                    f.write(got[0])
                sources[name]["bos_token"], sources[name]["eos_token"] = got[1], got[2]
            else:  # e.g. the Gemma 3 270M GGUF carries no template: the family table renders it
                print(f"{file}: no tokenizer.chat_template", file=sys.stderr)
                sources.pop(name, None)
    with open(os.path.join(DIR, "sources.json"), "w") as f:
        json.dump(sources, f, indent=2, ensure_ascii=False)
        f.write("\n")

    env = environment()
    cases = []
    for name in sorted(sources):
        with open(os.path.join(TEMPLATES, name + ".jinja")) as f:
            source = f.read()
        template = env.from_string(source)
        src = sources[name]
        for conv_name, conv in CONVERSATIONS.items():
            ctx = {
                "messages": conv["messages"],
                "add_generation_prompt": conv.get("add_generation_prompt", True),
                "bos_token": src.get("bos_token", "<s>"),
                "eos_token": src.get("eos_token", "</s>"),
            }
            if "tools" in conv:
                ctx["tools"] = conv["tools"]
            ctx.update(src.get("kwargs", {}))  # what a template needs from chat_template_kwargs
            ctx.update(conv.get("kwargs", {}))
            case = {"template": name, "conversation": conv_name, "context": ctx}
            try:
                case["output"] = template.render(**ctx)
            except Exception as e:  # the template rejects this conversation
                case["error"] = f"{type(e).__name__}: {e}"
            cases.append(case)
    with open(os.path.join(DIR, "goldens.json"), "w") as f:
        json.dump({"now": NOW.isoformat(), "cases": cases}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    errors = sum(1 for c in cases if "error" in c)
    print(f"{len(sources)} templates, {len(cases)} cases ({errors} raise in jinja2)", file=sys.stderr)


if __name__ == "__main__":
    main()
