// Unit tests of tessera's Jinja engine: exact outputs for each construct (checked against
// Python jinja2 with trim_blocks/lstrip_blocks by hand), errors with line and column, and caps.
#include <gtest/gtest.h>

#include "jinja/template.h"

namespace tessera::jinja {
namespace {

std::string render(const std::string& src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object(),
                   const Limits& limits = {}) {
  auto t = Template::parse(src, limits);
  if (!t.ok()) return "PARSE ERROR: " + t.error().message;
  const ValueDict context = ctx.is_object() ? from_json(ctx).as_dict() : ValueDict{};
  auto out = t->render(context);
  if (!out.ok()) return "ERROR: " + out.error().message;
  return *out;
}

TEST(Jinja, TextAndOutput) {
  EXPECT_EQ(render("a{{ 1 + 2 }}b"), "a3b");
  EXPECT_EQ(render("{{ x }}|{{ y }}", {{"x", "hi"}}), "hi|");
  EXPECT_EQ(render("{{ none }} {{ true }} {{ 1.5 }} {{ 2.0 }} {{ 1e20 }} {{ 0.0001 }}"), "None True 1.5 2.0 1e+20 0.0001");
  EXPECT_EQ(render("{{ [1, 'a', none] }} {{ {'k': (1,)} }} {{ (1, 2) }}"), "[1, 'a', None] {'k': (1,)} (1, 2)");
  EXPECT_EQ(render("line\n"), "line");  // keep_trailing_newline=False
}

TEST(Jinja, WhitespaceControl) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");  // trim_blocks
  EXPECT_EQ(render("  {% if true %}x{% endif %}"), "x");                     // lstrip_blocks
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif %}"), "ab");
  EXPECT_EQ(render("a\n  {{ 1 }}\n"), "a\n  1");                              // no lstrip for {{
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(render("a {# c #}\nb"), "a b");
}

TEST(Jinja, Loops) {
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}"), "11,22,33");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"a", 1}, {"b", 2}}}}), "a=1;b=2;");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in range(10) if x is odd %}{{ x }}{% if x > 4 %}{% break %}{% endif %}{% endfor %}"), "135");
  EXPECT_EQ(render("{% for x in 'ab' %}{{ loop.revindex0 }}{{ loop.cycle('p', 'q') }}{% endfor %}"), "1p0q");
  // set inside a loop does not leak out; a namespace does.
  EXPECT_EQ(render("{% set x = 1 %}{% set ns = namespace(n=0) %}{% for i in [1,2] %}{% set x = 5 %}{% set ns.n = ns.n + i %}{% endfor %}{{ x }} {{ ns.n }}"), "1 3");
}

TEST(Jinja, MacrosCallsFilterBlocks) {
  EXPECT_EQ(render("{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}"), "[1B][23]");
  EXPECT_EQ(render("{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}"), "<in>");
  EXPECT_EQ(render("{% filter upper %}abc{% endfilter %}"), "ABC");
  EXPECT_EQ(render("{% set t %}  x  {% endset %}[{{ t | trim }}]"), "[x]");
}

TEST(Jinja, Expressions) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}"), "3 -4 1 2 3.5 1024");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }}"), "a1None abab [1, 2]");
  EXPECT_EQ(render("{{ 'x' if false else 'y' }}{{ 'z' if false }}"), "y");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 'b' in 'abc' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 1} }}"), "True True True True");
  EXPECT_EQ(render("{{ 'hello'[1:3] }} {{ [1,2,3,4][::-1] }} {{ 'héllo'[1] }} {{ [1,2,3][-1] }}"), "el [4, 3, 2, 1] é 3");
  EXPECT_EQ(render("{{ a or 'd' }} {{ 0 and 1 }}", {{"a", ""}}), "d 0");
}

TEST(Jinja, MethodsAndFilters) {
  EXPECT_EQ(render("{{ '  a b  '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'abc'.startswith(('x', 'a')) }}|{{ 'Ab'.upper() }}"),
            "a b|['a', 'b']|True|AB");
  EXPECT_EQ(render("{{ d.get('x', 5) }} {{ d.keys() | list }} {{ d | length }}", {{"d", {{"a", 1}}}}), "5 ['a'] 1");
  EXPECT_EQ(render("{{ {'b': 'é', 'a': [1, 2.5, true, none]} | tojson }}"), "{\"b\": \"é\", \"a\": [1, 2.5, true, null]}");
  EXPECT_EQ(render("{{ {'a': [1]} | tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ x | default('d') }} {{ '' | default('e', true) }} {{ [3,1,2] | sort | join('-') }}"), "d e 1-2-3");
  EXPECT_EQ(render("{{ l | selectattr('r', 'equalto', 'u') | map(attribute='c') | join }}",
                   {{"l", {{{"r", "u"}, {"c", "1"}}, {{"r", "a"}, {"c", "2"}}, {{"r", "u"}, {"c", "3"}}}}}),
            "13");
  EXPECT_EQ(render("{{ 'a\nb' | indent(2) }}|{{ 'x' | first }}|{{ [1,1,2] | unique | list }}|{{ '5' | int + 1 }}"), "a\n  b|x|[1, 2]|6");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | dictsort }}"), "[('a', 2), ('b', 1)]");
}

TEST(Jinja, Tests) {
  EXPECT_EQ(render("{{ x is defined }}{{ y is none }}{{ 's' is string }}{{ {} is mapping }}{{ 1 is number }}{{ [1] is iterable }}",
                   {{"x", 1}, {"y", nullptr}}),
            "TrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ x is not defined }}{{ 4 is divisibleby 2 }}{{ true is true }}{{ 1 is false }}"), "TrueTrueTrueFalse");
}

TEST(Jinja, ErrorsNameLineAndColumn) {
  EXPECT_EQ(render("a\n{{ raise_exception('bad role') }}"), "ERROR: template line 2 column 4: bad role");
  EXPECT_EQ(render("x\n  {% if %}"), "PARSE ERROR: template line 2 column 9: unexpected '%}'");
  EXPECT_EQ(render("{% for x in y %}"), "PARSE ERROR: template line 1 column 17: unexpected end of template, expected 'endfor'");
  EXPECT_EQ(render("{{ a.b.c }}"), "ERROR: template line 1 column 5: 'a' is undefined");
  EXPECT_EQ(render("{% include 'x' %}"), "PARSE ERROR: template line 1 column 4: unknown tag 'include'");
  EXPECT_EQ(render("{{ 1 + 'a' }}"), "ERROR: template line 1 column 4: unsupported operand type(s) for +: 'int' and 'str'");
}

TEST(Jinja, CapsStopHostileTemplates) {
  Limits small;
  small.max_steps = 1000;
  small.max_output_bytes = 1000;
  EXPECT_NE(render("{% for i in range(100000) %}{% endfor %}", {}, small).find("limit of 1000 loop iterations"), std::string::npos);
  EXPECT_NE(render("{% for i in range(500) %}xxxxxxxxxx{% endfor %}", {}, small).find("output exceeds"), std::string::npos);
  EXPECT_NE(render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nested too deeply"), std::string::npos);
  EXPECT_NE(render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nested too deeply"), std::string::npos);
  EXPECT_NE(render("{{ 'x' * 100000000000 }}").find("too long"), std::string::npos);
  EXPECT_NE(render("{{ 2 ** 100 }}").find("overflow"), std::string::npos);
  // Reference cycles (a namespace holding itself, a macro in the frame it closes over) render and
  // are freed (fuzz_jinja runs under LeakSanitizer).
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.self = ns %}{% macro m() %}{{ ns.self.a }}{% endmacro %}{{ m() }}"), "1");
}

}  // namespace
}  // namespace tessera::jinja
