#!/usr/bin/env python3
"""Writes tests/data/grammar/xgrammar_masks.json: XGrammar's token masks at every step of seeded
random walks through several grammars, for the SmolLM2 (49k) and Qwen2.5 (152k) vocabularies.
tests/grammar/test_grammar_xgrammar_masks.cpp walks the same tokens with tessera's matcher and
requires the same mask at every step (count and FNV-1a hash of the allowed ids; the ids too when
there are few).

The vocabulary is read from the GGUF the way tessera's grammar_vocabulary() does (byte-level BPE
pieces as bytes, control / user-defined / unknown tokens empty, end-of-generation ids as stop
tokens) and handed to XGrammar raw; the file records TokenTable's fingerprint of it so the test
fails loudly if the two readings ever differ.

Offline only: `pip install xgrammar gguf` (plus numpy). XGrammar's masks go through DLPack into a
numpy array; PyTorch is not needed (its PyPI wheel does not import without the CUDA packages:
"libcufile.so.0: cannot open shared object file"), so stand-in modules are used for the
`torch` and `transformers` imports that XGrammar makes at import time when they are missing
(scripts/xgrammar_offline.py, which also holds the grammars).
  python3 scripts/gen_grammar_xgrammar_masks.py [--models DIR]
"""
import argparse, importlib.metadata, json, pathlib, random, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from xgrammar_offline import FRONT_END_GRAMMARS as GRAMMARS, import_xgrammar  # noqa: E402

xgr = import_xgrammar()
import numpy as np  # noqa: E402
from gguf import GGUFReader  # noqa: E402

VOCABULARIES = [
    ("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    ("qwen2.5", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
]

STEPS = 40
SEEDS = [1, 2, 3]
LIST_LIMIT = 24  # allowed ids written out in full when there are at most this many


def gpt2_byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def read_vocabulary(path):
    """tessera's grammar_vocabulary(): bytes per id, stop ids (end-of-generation tokens)."""
    r = GGUFReader(str(path))
    def field(name):
        f = r.fields.get(name)
        return None if f is None else f
    def scalar(name):
        f = field(name)
        return None if f is None else int(f.parts[f.data[0]][0])
    model = bytes(field("tokenizer.ggml.model").parts[field("tokenizer.ggml.model").data[0]]).decode()
    assert model == "gpt2", f"{path}: only byte-level BPE vocabularies are read here, not {model}"
    tf = field("tokenizer.ggml.tokens")
    texts = [bytes(tf.parts[i]).decode("utf-8") for i in tf.data]
    yf = field("tokenizer.ggml.token_type")
    types = [int(yf.parts[i][0]) for i in yf.data]
    decoder = gpt2_byte_decoder()
    CONTROL, USER_DEFINED, UNKNOWN = 3, 4, 2
    vocab = []
    for text, t in zip(texts, types):
        if t in (CONTROL, USER_DEFINED, UNKNOWN):
            vocab.append(b"")
        else:
            vocab.append(bytes(decoder[c] for c in text if c in decoder))
    stops = set()
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        v = scalar(key)
        if v is not None and 0 <= v < len(texts):
            stops.add(v)
    for text in ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
                 "<EOT>", "<|end_of_text|>"):
        if text in texts and types[texts.index(text)] == CONTROL:
            stops.add(texts.index(text))
    return vocab, sorted(stops)


def fingerprint(vocab, stops):
    """TokenTable::fingerprint(): FNV-1a over the bytes and the stop ids."""
    h = 1469598103934665603
    def mix(b):
        nonlocal h
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    for s in vocab:
        for b in s:
            mix(b)
        mix(0xFF)
        mix(0x00)
    for i in stops:
        mix(i & 0xFF)
        mix((i >> 8) & 0xFF)
    return h


def ids_hash(ids):
    """FNV-1a over the allowed ids as little-endian 32-bit words (the test computes the same)."""
    h = 1469598103934665603
    for i in ids:
        for k in range(4):
            h = ((h ^ ((i >> (8 * k)) & 0xFF)) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def allowed_ids(matcher, bitmask, vocab_size):
    matcher.fill_next_token_bitmask(bitmask)
    bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[:vocab_size]
    return np.nonzero(bits)[0].tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=str(ROOT / "models"))
    args = ap.parse_args()
    out = {"xgrammar_version": importlib.metadata.version("xgrammar"), "vocabularies": [], "cases": []}
    for name, file_name in VOCABULARIES:
        vocab, stops = read_vocabulary(pathlib.Path(args.models) / file_name)
        out["vocabularies"].append({"name": name, "file": file_name, "vocab_size": len(vocab),
                                    "stop_ids": stops, "fingerprint": f"{fingerprint(vocab, stops):016x}"})
        info = xgr.TokenizerInfo(vocab, vocab_type=xgr.VocabType.RAW, vocab_size=len(vocab), stop_token_ids=stops)
        compiler = xgr.GrammarCompiler(info, max_threads=1)
        bitmask = np.zeros((1, (len(vocab) + 31) // 32), dtype=np.int32)
        for gname, text in GRAMMARS:
            compiled = compiler.compile_grammar(text)
            for seed in SEEDS:
                rng = random.Random(f"{name}/{gname}/{seed}")
                matcher = xgr.GrammarMatcher(compiled)
                steps = []
                for _ in range(STEPS):
                    allowed = allowed_ids(matcher, bitmask, len(vocab))
                    if not allowed:
                        break
                    pick = rng.choice(allowed)
                    step = {"token": pick, "count": len(allowed), "hash": f"{ids_hash(allowed):016x}"}
                    if len(allowed) <= LIST_LIMIT:
                        step["ids"] = allowed
                    steps.append(step)
                    assert matcher.accept_token(pick), (gname, pick)
                    if pick in stops or matcher.is_terminated():
                        break
                out["cases"].append({"vocabulary": name, "grammar_name": gname, "grammar": text,
                                     "seed": seed, "steps": steps})
                print(f"{name} {gname} seed {seed}: {len(steps)} steps, "
                      f"allowed {min(s['count'] for s in steps)}..{max(s['count'] for s in steps)}")
    path = ROOT / "tests/data/grammar/xgrammar_masks.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=0) + "\n")
    print(f"-> {path} ({path.stat().st_size} bytes)")


main()
