#!/usr/bin/env python3
"""Token ids of SmolLM2-135M-Instruct's tokenizer for a dozen varied strings, from llama.cpp (the
PyPI package llama-cpp-python, vocab only), written to tests/data/smollm2_tokenize.json. The C++
test (tests/tokenizer/test_smollm2.cpp, LABEL model) compares tessera's ids with these.

Each case: text, parse_special, ids (no BOS: SmolLM2's add_bos_token is false).

It also checks the pre-tokenizers that no shared vocab file exercises (llama3 = llama-bpe, qwen2,
default): the GPT-2 vocab file is rewritten with another tokenizer.ggml.pre into a temporary file,
and the ids of every string of its .inp file go to tests/tokenizer/data/gpt2_vocab_pre_variants.json
(the C++ test loads the GPT-2 vocab and swaps `pre` the same way).
Usage: python3 scripts/gen_tokenizer_goldens.py
"""
import json
import os
import struct
import tempfile

from llama_cpp import Llama, __version__ as llama_cpp_version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
OUT = os.path.join(ROOT, "tests", "data", "smollm2_tokenize.json")
GPT2_VOCAB = os.path.join(ROOT, "..", "shared", "testdata", "tokenizer", "ggml-vocab-gpt-2.gguf")
PRE_OUT = os.path.join(ROOT, "tests", "tokenizer", "data", "gpt2_vocab_pre_variants.json")
PRE_VARIANTS = ["llama-bpe", "qwen2", "default"]

CHAT = "<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"

TEXTS = [
    ("Hello, world!", False),
    ("def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n", False),
    ("The year 2024 had 366 days; pi = 3.14159265, 1,000,000 and 0x1F.", False),
    ("Grüße aus München! Ça va? ñandú, naïve café", False),
    ("日本語のテキスト、中文文本，한국어 텍스트", False),
    ("emoji: 🦙🚀 😀👍🏽 ❤️ ✅", False),
    ("tabs\tand   spaces     and\n\n\nnewlines \r\n end   ", False),
    ("   leading spaces and trailing   ", False),
    ("I'm sure they'll say it's 'quoted' and we've DON'T", False),
    ("<html><body class=\"x\">&amp; {json: [1, 2]}</body></html>", False),
    (CHAT, True),
    (CHAT, False),
    ("<|endoftext|>text after<|im_end|>", True),
    ("x" * 100 + " " + "ab" * 30, False),
]


def rewrite_pre(src, dst, pre):
    """Copies a tensor-less GGUF, replacing the tokenizer.ggml.pre string value."""
    data = open(src, "rb").read()
    magic, version, num_tensors, num_kv = struct.unpack_from("<4sIQQ", data, 0)
    assert magic == b"GGUF" and num_tensors == 0
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(pos, t):
        if t == 8:
            return pos + 8 + struct.unpack_from("<Q", data, pos)[0]
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, pos)
            pos += 12
            for _ in range(n):
                pos = skip(pos, et)
            return pos
        return pos + sizes[t]

    out = bytearray(data[:24])
    pos = 24
    for _ in range(num_kv):
        start = pos
        klen = struct.unpack_from("<Q", data, pos)[0]
        key = data[pos + 8:pos + 8 + klen].decode()
        pos += 8 + klen
        t = struct.unpack_from("<I", data, pos)[0]
        end = skip(pos + 4, t)
        if key == "tokenizer.ggml.pre":
            v = pre.encode()
            out += data[start:pos + 4] + struct.pack("<Q", len(v)) + v
        else:
            out += data[start:end]
        pos = end
    out += b"\0" * ((-len(out)) % 32)
    open(dst, "wb").write(bytes(out))


def gen_pre_variants():
    texts = open(GPT2_VOCAB + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
    result = {"generator": "scripts/gen_tokenizer_goldens.py", "llama_cpp_python": llama_cpp_version,
              "vocab": "ggml-vocab-gpt-2.gguf", "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRE_VARIANTS:
            path = os.path.join(tmp, pre + ".gguf")
            rewrite_pre(GPT2_VOCAB, path, pre)
            m = Llama(model_path=path, vocab_only=True, verbose=False)
            result["variants"][pre] = [
                {"text": t, "ids": list(m.tokenize(t.encode("utf-8"), add_bos=False, special=False))}
                for t in texts]
    os.makedirs(os.path.dirname(PRE_OUT), exist_ok=True)
    with open(PRE_OUT, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {len(PRE_VARIANTS)} x {len(texts)} cases to {PRE_OUT}")


def main():
    gen_pre_variants()
    m = Llama(model_path=MODEL, vocab_only=True, verbose=False)
    cases = []
    for text, special in TEXTS:
        ids = m.tokenize(text.encode("utf-8"), add_bos=False, special=special)
        cases.append({"text": text, "parse_special": special, "ids": list(ids)})
    header = {"generator": "scripts/gen_tokenizer_goldens.py", "llama_cpp_python": llama_cpp_version,
              "model": "SmolLM2-135M-Instruct.Q4_1.gguf", "add_bos": False}
    with open(OUT, "w", encoding="utf-8") as f:  # one case per line, for readable diffs
        f.write(json.dumps(header, ensure_ascii=False)[:-1] + ', "cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
