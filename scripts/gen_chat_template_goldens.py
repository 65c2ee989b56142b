#!/usr/bin/env python3
"""Renders the chat templates under tests/data/chat_templates/ with jinja2 (the way Hugging Face
transformers does: sandboxed, trim_blocks, lstrip_blocks, raise_exception) on a few conversations
and writes tests/data/chat_templates/goldens.json, which tests/tokenizer/test_chat_template.cpp
compares byte for byte with the C++ renderer (no Python needed there).

smollm2.jinja is taken from the SmolLM2 GGUF (tokenizer.chat_template) when the model is present.
A template the C++ side does not recognise (unknown_*.jinja) falls back to ChatML, so its golden is
rendered with chatml.jinja and marked "fallback".

Usage: pip install jinja2; python3 scripts/gen_chat_template_goldens.py
"""
import json
import os
import struct
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIR = os.path.join(ROOT, "tests", "data", "chat_templates")
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

# family -> (bos_token, eos_token)
TOKENS = {
    "chatml": ("", "<|im_end|>"),
    "smollm2": ("", "<|im_end|>"),
    "llama2": ("<s>", "</s>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral_v1": ("<s>", "</s>"),
    "mistral_v3": ("<s>", "</s>"),
    "gemma": ("<bos>", "<eos>"),
    "phi3": ("<s>", "<|endoftext|>"),
    "unknown_zephyr": ("<s>", "</s>"),
}

CONVERSATIONS = {
    "system_user": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
    "user_only": [{"role": "user", "content": "Hello! How are you?"}],
    "multi_turn": [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Color of the sky?"},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "And grass?"},
    ],
    "multi_turn_no_system": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello. How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "ends_with_assistant": [
        {"role": "user", "content": "  spaced  content \n"},
        {"role": "assistant", "content": "\tOK \n"},
    ],
    "unicode": [{"role": "user", "content": "Grüße, 世界! 🦙 \"quotes\" {{ not jinja }}"}],
    "bad_alternation": [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
    ],
}


def read_gguf_chat_template(path):
    """Returns tokenizer.chat_template from a GGUF file's metadata (None when absent)."""
    def rd(f, fmt):
        return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

    def rs(f):
        return f.read(rd(f, "Q")).decode("utf-8")

    sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def skip(f, t):
        if t == 8:
            rs(f)
        elif t == 9:
            et, n = rd(f, "I"), rd(f, "Q")
            for _ in range(n):
                skip(f, et)
        else:
            rd(f, sizes[t])

    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            return None
        rd(f, "I"), rd(f, "Q")
        for _ in range(rd(f, "Q")):
            key, t = rs(f), rd(f, "I")
            if key == "tokenizer.chat_template" and t == 8:
                return rs(f)
            skip(f, t)
    return None


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def render(source, messages, add_generation_prompt, bos, eos):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                          bos_token=bos, eos_token=eos)


def main():
    if os.path.exists(MODEL):
        source = read_gguf_chat_template(MODEL)
        with open(os.path.join(DIR, "smollm2.jinja"), "w", encoding="utf-8") as f:
            f.write(source)
    cases = []
    for family, (bos, eos) in TOKENS.items():
        path = os.path.join(DIR, family + ".jinja")
        if not os.path.exists(path):
            sys.exit(f"missing {path}")
        fallback = family.startswith("unknown")
        render_path = os.path.join(DIR, "chatml.jinja") if fallback else path
        with open(render_path, encoding="utf-8") as f:
            source = f.read()
        for name, messages in CONVERSATIONS.items():
            for gen in (False, True):
                case = {"template": family + ".jinja", "conversation": name, "messages": messages,
                        "add_generation_prompt": gen, "bos_token": bos, "eos_token": eos,
                        "fallback": fallback}
                try:
                    case["expected"] = render(source, messages, gen, bos, eos)
                except jinja2.exceptions.TemplateError as e:
                    case["error"] = str(e)
                cases.append(case)
    out = os.path.join(DIR, "goldens.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"generator": "scripts/gen_chat_template_goldens.py", "jinja2": jinja2.__version__,
                   "cases": cases}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
