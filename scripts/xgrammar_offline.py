"""What the offline XGrammar golden scripts share (scripts/gen_grammar_xgrammar_*.py):

- import_xgrammar(): XGrammar imports torch and transformers at import time, for helpers these
  scripts never call; where they are missing (PyTorch's CPU wheel does not import here without
  the CUDA packages), stand-in modules take their place. Grammar matching and token masks work
  without them (masks go through DLPack into numpy).
- FRONT_END_GRAMMARS: grammars in the shapes tessera's front ends emit (JSON Schema objects with
  bounded strings, enums, arrays and formats; any JSON; a regex; choices) plus a recursive raw
  grammar, used by both the mask walks and the acceptance strings.

Offline only: `pip install --no-deps xgrammar apache-tvm-ffi` (plus numpy and pydantic).
"""
import pathlib
import sys
import tempfile


def import_xgrammar():
    stubs = pathlib.Path(tempfile.mkdtemp())
    try:
        import torch  # noqa: F401
    except ImportError:
        (stubs / "torch").mkdir()
        (stubs / "torch" / "__init__.py").write_text(
            "class _Any(type):\n"
            "    def __getattr__(cls, n): return _Any(n, (), {})\n"
            "    def __or__(cls, o): return cls\n"
            "    def __ror__(cls, o): return cls\n"
            "    def __call__(cls, *a, **k): return _Any('x', (), {})\n"
            "Tensor = _Any('Tensor', (), {})\n"
            "def __getattr__(name): return _Any(name, (), {})\n")
    try:
        import transformers  # noqa: F401
    except ImportError:
        (stubs / "transformers").mkdir()
        (stubs / "transformers" / "__init__.py").write_text(
            "class PreTrainedTokenizerBase: pass\n"
            "class PreTrainedTokenizerFast(PreTrainedTokenizerBase): pass\n"
            "def __getattr__(name): return type(name, (), {})\n")
    sys.path.insert(0, str(stubs))
    import xgrammar
    return xgrammar


JSON_BASE = r'''json-string ::= "\"" json-char* "\""
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
json-int ::= "-"? ( "0" | [1-9] [0-9]* )
json-number ::= json-int ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
'''

FRONT_END_GRAMMARS = [
    ("schema_person", r'''root ::= "{" "\"name\"" ":" "\"" json-char{0,12} "\"" "," "\"age\"" ":" age ( "," "\"tags\"" ":" tags )? "}"
age ::= "0" | [1-9] [0-9]{0,1} | "1" [01] [0-9] | "120"
tags ::= "[" ( tag ( "," tag ){0,1} )? "]"
tag ::= "\"a b\"" | "\"c\\\"d\""
''' + JSON_BASE),
    ("schema_order", r'''root ::= "{" ws "\"id\"" ws ":" ws uuid ws "," ws "\"items\"" ws ":" ws "[" ws item ( ws "," ws item ){0,2} ws "]" ws "," ws "\"note\"" ws ":" ws ( json-string | "null" ) ws "}"
item ::= "{" ws "\"sku\"" ws ":" ws "\"" [A-Z]{3} "-" [0-9]{2,4} "\"" ws "," ws "\"qty\"" ws ":" ws [1-9] [0-9]? ws "," ws "\"price\"" ws ":" ws json-number ws "}"
uuid ::= "\"" [0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12} "\""
ws ::= [ \t\n]{0,2}
''' + JSON_BASE),
    ("json_any", r'''root ::= json-object
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{" ws ( json-string ws ":" ws json-value ( ws "," ws json-string ws ":" ws json-value )* )? ws "}"
json-array ::= "[" ws ( json-value ( ws "," ws json-value )* )? ws "]"
ws ::= [ \t\n]*
''' + JSON_BASE),
    ("regex_name", r'''root ::= [A-Z] [a-z]{2,5} ( " " [0-9]+ )? "."
'''),
    # Unambiguous on purpose: XGrammar's Earley parser slows down by the step on `( [^<]{1,8} )*`
    # (seconds per Qwen mask after 40 tokens); tessera's state sets do not care.
    ("tags", r'''root ::= "<" [a-z]+ ">" ( [^<] | root )* "</" [a-z]+ ">"
'''),
    ("choice", r'''root ::= "apple" | "apricot jam" | "banana split" | "{\"k\": 1}" | "日本語"
'''),
]
