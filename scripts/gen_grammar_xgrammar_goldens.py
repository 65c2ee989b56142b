#!/usr/bin/env python3
"""Writes tests/data/grammar/xgrammar_accept.json: for grammars in the syntax tessera and XGrammar
share, many random and adversarial strings with XGrammar's verdict (accept the whole string or
not). tests/grammar/test_grammar_xgrammar.cpp checks that tessera's automaton gives the same
verdict on every string. Needs `pip install xgrammar` (tests/offline only; PyTorch is not needed
for grammar matching, a stand-in module is used when it is missing)."""
import importlib.metadata, json, os, pathlib, random, sys, tempfile

try:
    import torch  # noqa: F401
except ImportError:  # xgrammar imports torch for its token-bitmask helpers only
    stub = pathlib.Path(tempfile.mkdtemp()) / "torch"
    stub.mkdir()
    (stub / "__init__.py").write_text(
        "class _Any(type):\n"
        "    def __getattr__(cls, n): return _Any(n, (), {})\n"
        "    def __or__(cls, o): return cls\n"
        "    def __ror__(cls, o): return cls\n"
        "    def __call__(cls, *a, **k): return _Any('x', (), {})\n"
        "Tensor = _Any('Tensor', (), {})\n"
        "def __getattr__(name): return _Any(name, (), {})\n")
    sys.path.insert(0, str(stub.parent))
import xgrammar as xgr

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


def mutations(s, rng, alphabet):
    out = set()
    for _ in range(30):
        t = list(s)
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
        out.add("".join(t))
    return out


def main():
    rng = random.Random(27)
    cases = []
    for name, text, examples in GRAMMARS:
        g = xgr.Grammar.from_ebnf(text)
        alphabet = sorted(set("".join(examples)) | set('"\\{}[]:,. -0aé\n'))
        strings = set(examples) | {""}
        for e in examples:
            strings |= mutations(e, rng, alphabet)
        for _ in range(120):
            strings.add("".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 10))))
        verdicts = []
        for s in sorted(strings):
            verdicts.append([s, bool(xgr.testing._is_grammar_accept_string(g, s))])
        cases.append({"name": name, "grammar": text, "strings": verdicts})
        print(f"{name}: {len(verdicts)} strings, {sum(v for _, v in verdicts)} accepted")
    path = pathlib.Path(__file__).resolve().parent.parent / "tests/data/grammar/xgrammar_accept.json"
    path.write_text(json.dumps({"xgrammar_version": importlib.metadata.version("xgrammar"), "cases": cases}, ensure_ascii=False, indent=0) + "\n")
    print(f"-> {path}")


main()
