#!/usr/bin/env python3
"""Writes tests/data/grammar/xgrammar_accept.json: for grammars in the syntax tessera and XGrammar
share, many random and adversarial byte strings with XGrammar's verdict (the whole string accepted
and the grammar able to end there). tests/grammar/test_grammar_xgrammar.cpp checks that tessera's
automaton gives the same verdict on every one.

Grammars: the hand-written ones below plus the front-end shapes of scripts/xgrammar_offline.py.
Strings per grammar:
- the examples, and strings sampled from the grammar by XGrammar itself (a walk over single bytes:
  at each step a byte its mask allows, ending where it may end), so accepted strings are many;
- up to 8 random prefixes of each (mostly incomplete), and byte-level mutations of them (delete, insert,
  replace, truncate, repeat) with bytes drawn from the grammar's alphabet and from the UTF-8
  edges (0x00, 0x1F, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC3, 0xE9, 0xED, 0xF4, 0xF5, 0xFF: NUL and
  control bytes, stray continuation bytes, overlong leads, surrogate leads, bytes never valid);
- invalid UTF-8 spliced into accepted strings (INVALID_UTF8);
- random strings over the alphabet, and random raw bytes.
The verdict: xgr.testing._is_grammar_accept_string for valid UTF-8; for the rest, XGrammar's
GrammarMatcher fed one byte a token (vocabulary: the 256 bytes + a stop token). The byte matcher
also samples the strings; its end is confirmed by the string check (it offers its stop token too
early inside "tags"' recursion). A string that is not valid UTF-8 is stored as {"hex": ...}.

Offline only: `pip install --no-deps xgrammar apache-tvm-ffi` (see scripts/xgrammar_offline.py).
"""
import importlib.metadata, json, pathlib, random, sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from xgrammar_offline import FRONT_END_GRAMMARS, import_xgrammar  # noqa: E402

xgr = import_xgrammar()

GRAMMARS = [
    ("literal_alt", 'root ::= "abc" | "abd" | "a"', ["abc", "abd", "a"]),
    ("classes", 'root ::= [a-c]+ [^a-c0-9]? [0-9]{2,3}', ["ab12", "cx123", "a!99"]),
    ("nested_groups", 'root ::= ("x" ("y" | "z")*)+ "!"', ["xyz!", "x!", "xyxz!"]),
    ("balanced", 'root ::= p\np ::= "(" p* ")"', ["()", "(())()", "((()))"][:1] + ["(()())"]),
    ("optional_chain", 'root ::= "a"? "b"? "c"? "d"', ["d", "abd", "acd", "abcd"]),
    ("repeat_bounds", 'root ::= "ab"{1,3} "c"{2} "d"{0,2}', ["abcc", "abababccdd", "abccd"]),
    ("unicode", 'root ::= [α-ω]+ " " [^\\x00-\\x7F]{1,2}', ["αβ é", "ω 日本"]),
    ("escapes", 'root ::= "\\"" [^"\\\\]* "\\"" "\\n"?', ['"hi"', '"a b"\n']),
    ("json", r'''root ::= object
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}" ws
member ::= string ws ":" ws value ws
array ::= "[" ws ( value ( "," ws value )* )? "]" ws
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws ::= [ \t\n]*''', ['{"a": 1}', '{"a":[1,2.5e3,{"b":null}],"c":"x\\u00e9y"}', '{}', '{ "k" : [ true , false ] }']),
    ("email_like", 'root ::= [a-z0-9._]+ "@" [a-z]+ ("." [a-z]{2,4})+', ["a.b@ex.com", "x@y.co.uk"]),
    ("integer_range", 'root ::= "-"? ("0" | [1-9] [0-9]{0,2})', ["0", "-12", "999"]),
    ("star_of_nullable", 'root ::= ("a"? "b"?)* "c"', ["c", "abc", "bbac"]),
]



# UTF-8 edges: see the docstring.
EDGE_BYTES = bytes([0x00, 0x1F, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC3, 0xE9, 0xED, 0xF4, 0xF5, 0xFF])
# Invalid UTF-8 spliced into accepted strings: an encoded surrogate (U+D800), overlong NUL and
# "/" (2 and 3 bytes), a code point past U+10FFFF, a lone continuation byte, a cut 3-byte lead.
INVALID_UTF8 = [b"\xed\xa0\x80", b"\xc0\x80", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\x80", b"\xe6\x97"]
# Examples for the front-end shapes whose random walks rarely end ("tags" must close its tags).
FRONT_END_EXAMPLES = {"tags": ["<a>x</a>", "<b><i>y</i>z</b>", "<p>\u00e9<q></q></p>"]}
SAMPLES = 40          # strings sampled from each grammar
MAX_SAMPLE_BYTES = 48
STOP = 256            # the stop token of the byte vocabulary


def byte_compiler():
    vocab = [bytes([b]) for b in range(256)] + [b"</s>"]
    info = xgr.TokenizerInfo(vocab, vocab_type=xgr.VocabType.RAW, vocab_size=len(vocab), stop_token_ids=[STOP])
    return xgr.GrammarCompiler(info, max_threads=1)


def allowed_bytes(matcher, bitmask):
    import numpy as np
    matcher.fill_next_token_bitmask(bitmask)
    bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[:STOP + 1]
    return np.nonzero(bits)[0].tolist()


def sample(compiled, grammar, rng):
    """A string XGrammar's mask allows byte by byte, ending where the grammar may end; None when
    it could not end in time. The end is also asked of _is_grammar_accept_string: the matcher
    offers its stop token too early in a recursion under a star ("tags": after "<a>")."""
    import numpy as np
    bitmask = np.zeros((1, (STOP + 1 + 31) // 32), dtype=np.int32)
    m = xgr.GrammarMatcher(compiled)
    out = bytearray()
    while True:
        allowed = allowed_bytes(m, bitmask)
        can_stop = STOP in allowed
        nexts = [b for b in allowed if b != STOP]
        if can_stop and (not nexts or rng.random() < 0.2 or len(out) >= MAX_SAMPLE_BYTES):
            try:
                if xgr.testing._is_grammar_accept_string(grammar, out.decode("utf-8")):
                    return bytes(out)
            except UnicodeDecodeError:  # an encoded surrogate, which XGrammar's byte matcher lets by
                return None
        if not nexts or len(out) >= 8 * MAX_SAMPLE_BYTES:
            return None
        b = rng.choice(nexts)
        assert m.accept_token(b)
        out.append(b)


def verdict(compiled, grammar, s):
    """XGrammar's verdict: _is_grammar_accept_string for valid UTF-8 (it takes text); otherwise the
    byte matcher (it lets an encoded surrogate through a negated class: the one difference from
    tessera, which the test names)."""
    try:
        return bool(xgr.testing._is_grammar_accept_string(grammar, s.decode("utf-8")))
    except UnicodeDecodeError:
        pass
    m = xgr.GrammarMatcher(compiled)
    for b in s:
        if not m.accept_token(b):
            return False
    return m.accept_token(STOP)


def mutations(s, rng, alphabet):
    out = set()
    for _ in range(12):
        t = bytearray(s)
        op = rng.randrange(5)
        if op == 0 and t:
            del t[rng.randrange(len(t))]
        elif op == 1:
            t.insert(rng.randrange(len(t) + 1), rng.choice(alphabet))
        elif op == 2 and t:
            t[rng.randrange(len(t))] = rng.choice(alphabet)
        elif op == 3 and t:
            t = t[: rng.randrange(len(t))]
        else:
            t = t + t[: rng.randrange(len(t) + 1)]
        out.add(bytes(t))
    return out


def stored(s):
    try:
        return s.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": s.hex()}


def main():
    rng = random.Random(27)
    compiler = byte_compiler()
    cases = []
    for name, text, examples in GRAMMARS + [(n, t, FRONT_END_EXAMPLES.get(n, [])) for n, t in FRONT_END_GRAMMARS]:
        compiled = compiler.compile_grammar(text)
        grammar = xgr.Grammar.from_ebnf(text)
        accepted = [e.encode() for e in examples]
        for _ in range(SAMPLES):
            s = sample(compiled, grammar, rng)
            if s is not None:
                accepted.append(s)
        alphabet = sorted(set(b"".join(accepted)) | set('"\\{}[]:,. -0a\n'.encode()) | set(EDGE_BYTES))
        strings = set(accepted) | {b""}
        for a in accepted:
            strings |= {a[:rng.randrange(len(a))] for _ in range(min(len(a), 8))} if a else set()
            strings |= mutations(a, rng, alphabet)
        for a in accepted[:6]:
            for bad in INVALID_UTF8:
                k = rng.randrange(len(a) + 1)
                strings.add(a[:k] + bad + a[k:])
        for _ in range(60):
            strings.add(bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 12))))
        for _ in range(20):
            strings.add(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8))))
        verdicts = []
        for s in sorted(strings):
            v = verdict(compiled, grammar, s)
            verdicts.append([stored(s), v])
        cases.append({"name": name, "grammar": text, "strings": verdicts})
        invalid_accepted = [s for s, v in verdicts if isinstance(s, dict) and v]
        if invalid_accepted: print("invalid UTF-8 accepted:", name, invalid_accepted[:5], len(invalid_accepted))
        print(f"{name}: {len(verdicts)} strings, {sum(v for _, v in verdicts)} accepted, "
              f"{sum(isinstance(s, dict) for s, _ in verdicts)} not UTF-8")
    path = pathlib.Path(__file__).resolve().parent.parent / "tests/data/grammar/xgrammar_accept.json"
    path.write_text(json.dumps({"xgrammar_version": importlib.metadata.version("xgrammar"), "cases": cases},
                               ensure_ascii=False, indent=0) + "\n")
    print(f"-> {path}")


main()
