// Chat templates rendered by our Jinja interpreter against Python jinja2's output on the same
// contexts (tests/golden/data/chat_templates, made by tools/make_chat_template_goldens.py), plus
// loading from a model directory, unsupported constructs and the limits on outside templates.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/text/chat_template.h"
#include "engine/text/jinja/interpreter.h"
#include "engine/text/jinja/parser.h"
#include "engine/text/jinja/value.h"

namespace fs = std::filesystem;
using sy::text::ChatTemplate;
namespace jinja = sy::text::jinja;
using ojson = nlohmann::ordered_json;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in) << p;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const fs::path kGoldens = fs::path(SY_SOURCE_DIR) / "tests" / "golden" / "data" / "chat_templates";

ojson golden(const std::string& name) { return ojson::parse(read(kGoldens / (name + ".json"))); }

// One golden case: the same text as jinja2, or an error where jinja2 raised one.
void check_case(const ChatTemplate& t, const ojson& c) {
  SCOPED_TRACE(c["name"].get<std::string>());
  auto out = t.render(c["context"]);
  if (c.contains("output")) {
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(*out, c["output"].get<std::string>());
  } else {
    ASSERT_FALSE(out.ok()) << "jinja2 raised " << c["error"] << " but we rendered:\n" << *out;
    if (c.contains("error_contains")) {
      EXPECT_NE(out.status().message().find(c["error_contains"].get<std::string>()), std::string::npos)
          << out.status().message();
    }
  }
}

// A template that must fail to render with a message containing `expect`, within `max_seconds`
// (a limit that is checked too late shows as time spent building what it refuses).
void expect_render_error(const std::string& source, const std::string& expect, double max_seconds = 60.0) {
  SCOPED_TRACE(source);
  auto t = ChatTemplate::parse(source, "tmpl");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto start = std::chrono::steady_clock::now();
  auto out = t->render(ojson::object());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(out.ok()) << "rendered " << out->size() << " bytes";
  EXPECT_NE(out.status().message().find(expect), std::string::npos) << out.status().message();
  EXPECT_LT(seconds, max_seconds);
}

class ModelTemplate : public testing::TestWithParam<std::string> {};

TEST_P(ModelTemplate, MatchesJinja2) {
  const ojson g = golden(GetParam());
  const std::string source = read(fs::path(SY_SOURCE_DIR) / g["template"].get<std::string>());
  auto t = ChatTemplate::parse(source, g["template"].get<std::string>());
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_GE(g["cases"].size(), 8u);
  for (const auto& c : g["cases"]) check_case(*t, c);
}

INSTANTIATE_TEST_SUITE_P(Assets, ModelTemplate, testing::Values("mixtral", "qwen2_moe", "qwen3_moe"));

// Each case a template of its own, rendered as jinja2 did, or refused where jinja2 raised.
void check_templates(const std::string& file, std::size_t min_cases) {
  const ojson g = golden(file);
  ASSERT_GE(g["cases"].size(), min_cases);
  for (const auto& c : g["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    auto t = ChatTemplate::parse(c["template"].get<std::string>(), "snippet:" + name);
    if (!t.ok()) {
      // Only where jinja2 also refused the template.
      EXPECT_TRUE(c.contains("error")) << "we refused a template jinja2 renders: " << t.status().message();
      continue;
    }
    check_case(*t, c);
  }
}

TEST(JinjaSnippets, MatchJinja2) { check_templates("snippets", 140); }

// A seeded differential run: random expressions over every value type, operator, filter,
// method and test.
TEST(JinjaRandomExpressions, MatchJinja2) { check_templates("expressions", 600); }

TEST(ChatTemplate, RenderFromUnorderedJsonAndDefaults) {
  auto t = ChatTemplate::parse("{{ tools is none }}{{ documents is none }}{{ add_generation_prompt }}"
                               "{% for m in messages %}{{ m.role }}:{{ m.content }}{% endfor %}",
                               "t");
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto out = t->render(nlohmann::json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "TrueTrueFalseuser:hi");
  EXPECT_FALSE(t->render(nlohmann::json::array()).ok());
}

TEST(ChatTemplate, ErrorsNameTheOriginLineAndConstruct) {
  struct Case {
    const char* source;
    const char* expect;
  };
  const Case cases[] = {
      {"ok\n  {% include 'x.jinja' %}", "tmpl:2:6: unsupported template construct '{% include %}'"},
      {"{% extends 'base' %}", "tmpl:1:4: unsupported template construct '{% extends %}'"},
      {"{% filter upper %}x{% endfilter %}", "unsupported template construct '{% filter %}'"},
      {"{% call m() %}x{% endcall %}", "unsupported template construct '{% call %}'"},
      {"{% import 'm' as m %}", "'{% import %}'"},
      {"{% block b %}{% endblock %}", "'{% block %}'"},
      {"{{ x | frobnicate }}", "tmpl:1:8: unsupported filter 'frobnicate'"},
      {"{{ x is frobnicated }}", "tmpl:1:9: unsupported test 'frobnicated'"},
      {"{% for x in y recursive %}{% endfor %}", "'recursive' for loop"},
      {"{% if x %}", "tmpl:1:11: unexpected end of template"},
      {"{% break %}", "'break' outside a for loop"},
      {"{{ 'unterminated }}", "tmpl:1:4: unterminated string literal"},
      {"{{ a ? b }}", "unexpected character '?'"},
      {"{# open comment", "unclosed comment"},
      {"{% set x | upper is defined %}x{% endset %}", "expected only filters"},
      {"{{ 99999999999999999999 }}", "out of the supported 64-bit range"},
  };
  for (const auto& c : cases) {
    auto t = ChatTemplate::parse(c.source, "tmpl");
    ASSERT_FALSE(t.ok()) << c.source;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
  }
}

TEST(ChatTemplate, RuntimeErrorsCarryTheMessageAndLocation) {
  auto t = ChatTemplate::parse("line1\n{{ raise_exception('roles must alternate') }}", "tmpl");
  ASSERT_TRUE(t.ok());
  auto out = t->render(ojson::object());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "tmpl:2:4: roles must alternate");
}

TEST(ChatTemplate, BoundsWorkOutputAndRecursion) {
  struct Case {
    const char* source;
    const char* expect;
  };
  const Case cases[] = {
      {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "macro calls nested more than 200 deep"},
      {"{% for i in range(3000) %}{% for j in range(3000) %}{% endfor %}{% endfor %}", "budget of 2000000 steps"},
      {"{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
       "exceeds"},
      {"{{ range(1000000)|length }}", "Range too big"},
      {"{% macro f(n) %}{% if 1 %}{% if 1 %}{% if 1 %}{% if 1 %}{{ f(n) }}{% endif %}{% endif %}{% endif %}{% endif %}"
       "{% endmacro %}{{ f(0) }}",
       "template evaluation nested more than 1000 deep"},
  };
  for (const auto& c : cases) expect_render_error(c.source, c.expect);
  // Nesting deep enough to overflow a naive recursive parser is refused, not a crash.
  const std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  auto t = ChatTemplate::parse(deep, "deep");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("nested more than"), std::string::npos) << t.status().message();
  // Long operator chains make deep trees without nesting.
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " ~ 1";
  auto c = ChatTemplate::parse(chain + " }}", "chain");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("expression nested more than 300 deep"), std::string::npos)
      << c.status().message();
  std::string long_ok = "{{ 1";
  for (int i = 0; i < 200; ++i) long_ok += " + 1";
  auto ok = ChatTemplate::parse(long_ok + " }}", "ok");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok->render(ojson::object()), "201");
  std::string deep_ifs;
  for (int i = 0; i < 1000; ++i) deep_ifs += "{% if true %}";
  EXPECT_FALSE(ChatTemplate::parse(deep_ifs, "deep").ok());
}

// Python 3.11's answers (Unicode 14) for each string, hard-coded from python3.
TEST(ChatTemplate, IsalphaIsdigitIsalnumIsnumericFollowPython) {
  struct Case {
    const char* text;
    bool alpha, digit, alnum, numeric;
  };
  const Case cases[] = {
      {"a", true, false, true, false},
      {"Z", true, false, true, false},
      {"5", false, true, true, true},
      {"\u20AC", false, false, false, false},
      {"\u00BD", false, false, true, true},
      {"\u0663", false, true, true, true},
      {"\u00B2", false, true, true, true},
      {"\u00B9", false, true, true, true},
      {"\u2070", false, true, true, true},
      {"\u2089", false, true, true, true},
      {"\u2460", false, true, true, true},
      {"\u2473", false, false, true, true},
      {"\u2776", false, true, true, true},
      {"\u216B", false, false, true, true},
      {"\u4E00", true, false, true, true},
      {"\u4E07", true, false, true, true},
      {"\u00E9", true, false, true, false},
      {"\u00DF", true, false, true, false},
      {"\u01C5", true, false, true, false},
      {"\u02B0", true, false, true, false},
      {"\u4E2D", true, false, true, false},
      {"\u30A2", true, false, true, false},
      {"\u0301", false, false, false, false},
      {"_", false, false, false, false},
      {" ", false, false, false, false},
      {"!", false, false, false, false},
      {"\U0001D7D8", false, true, true, true},
      {"\u0661", false, true, true, true},
      {"\u07C0", false, true, true, true},
      {"\U0001F642", false, false, false, false},
      {"\u2177", false, false, true, true},
      {"\U00010A40", false, true, true, true},
      {"x\u00B2", false, false, true, false},
      {"ab", true, false, true, false},
      {"a1", false, false, true, false},
      {"\u0661\u0662", false, true, true, true},
      {"x", true, false, true, false},
      {"\u5146", true, false, true, true},
      {"\u58F1", true, false, true, true},
      {"\U0002F890", true, false, true, true},
      {"\u00BC\u0663\u4E07", false, false, true, true},
      {"", false, false, false, false},
  };
  auto t = ChatTemplate::parse("{{ s.isalpha() }} {{ s.isdigit() }} {{ s.isalnum() }} {{ s.isnumeric() }}", "tmpl");
  ASSERT_TRUE(t.ok()) << t.status().message();
  auto py = [](bool b) { return b ? "True" : "False"; };
  for (const auto& c : cases) {
    auto out = t->render(ojson{{"s", c.text}});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(*out, std::string(py(c.alpha)) + " " + py(c.digit) + " " + py(c.alnum) + " " + py(c.numeric)) << c.text;
  }
}

// Outputs and messages from jinja2 3.1 in transformers' environment.
TEST(ChatTemplate, LoopCycleAndPaddingMethodsMatchJinja2) {
  const std::pair<const char*, const char*> cases[] = {
      {"{% for x in [1,2,3,4,5] %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}", "abcab"},
      {"{{ '42'.zfill(5) }}|{{ '-42'.zfill(5) }}|{{ '+7'.zfill(1) }}|{{ 'ab'.center(5, '*') }}|{{ 'ab'.center(6) }}|"
       "{{ 'abc'.center(6, '-') }}|{{ '\u00e9'.ljust(3, '\u00b7') }}|{{ 'x'.rjust(3) }}|{{ '\u0663'.isdecimal() }}|"
       "{{ '\u00b2'.isdecimal() }}",
       "00042|-0042|+7|**ab*|  ab  |-abc--|\u00e9\u00b7\u00b7|  x|True|False"},
      {"{{ 'x'.zfill(True) }}", "x"},
  };
  for (const auto& [source, expect] : cases) {
    auto t = ChatTemplate::parse(source, "tmpl");
    ASSERT_TRUE(t.ok()) << t.status().message();
    auto out = t->render(ojson::object());
    ASSERT_TRUE(out.ok()) << source << ": " << out.status().message();
    EXPECT_EQ(*out, expect) << source;
  }
  const std::pair<const char*, const char*> errors[] = {
      {"{{ 'a'.center(3, 'xy') }}", "The fill character must be exactly one character long"},
      {"{{ 'a'.zfill(2.0) }}", "'float' object cannot be interpreted as an integer"},
      {"{% for x in [1] %}{{ loop.cycle() }}{% endfor %}", "tmpl:1:"},
      {"{% for x in [1] %}{{ loop.cycle() }}{% endfor %}", "no items for cycling given"},
      {"{% for x in [1] %}{{ loop.changed(x) }}{% endfor %}", "loop.changed() is not supported"},
      {"{{ '{}'.format(1) }}", "str.format() is not supported (supported string methods: capitalize center"},
      {"{{ 'a'.swapcase() }}", "str.swapcase() is not supported"},
      {"{{ 'a'.zfill(100000000000) }}", "str.zfill(): the result exceeds the limit of 67108864 bytes"},
  };
  for (const auto& [source, expect] : errors) expect_render_error(source, expect);
}

// Each step may copy a string of up to 64 MiB: the byte budget, not the step budget, stops these.
TEST(ChatTemplate, BytesCopiedAreBounded) {
  const char* sources[] = {
      "{% set s = 'x' * 60000000 %}{% for i in range(100000) %}{% set t = s ~ '' %}{% endfor %}",
      "{% set s = 'x' * 60000000 %}{% for i in range(100000) %}{% set t %}{{ s }}{% endset %}{% endfor %}",
      "{% set s = 'x' * 60000000 %}{% for i in range(100000) %}{% if s == s ~ '' %}{% endif %}{% endfor %}",
  };
  for (const char* source : sources)
    expect_render_error(source, "template exceeded its budget of 1073741824 bytes", 10.0);
  // 2^24 * (2^40 + 1) wraps to 2^24 in 64 bits: the count must be compared, not the product.
  expect_render_error("{{ ('x' * 16777216) * 1099511627777 }}", "'*': the result exceeds the limit of 67108864 bytes");
  auto empty = ChatTemplate::parse("{{ ('' * 9223372036854775807)|length }}", "tmpl");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty->render(ojson::object()), "0");
}

// Results that would take from a gigabyte to 100 GB if built whole (a list of 100000 references
// to one 1 MB string, printed; each of 100000 lines indented by 1 MB) fail at the 64 MiB limit on
// one value, naming what outgrew it, within about that much memory and a second: a check after the
// build would not finish.
TEST(ChatTemplate, BuiltResultsAreCheckedAsTheyGrow) {
  const std::pair<const char*, const char*> cases[] = {
      {"{{ ['x' * 1000000] * 100000 }}", "printing a list: the result exceeds the limit of 67108864 bytes"},
      {"{{ {'k': ['x' * 1000000] * 100000} }}", "printing a dict: the result exceeds the limit of 67108864 bytes"},
      {"{{ (['x' * 1000000] * 100000)|string|length }}", "printing a list: the result exceeds"},
      {"{{ (['x' * 1000000] * 100000)|upper|length }}", "printing a list: the result exceeds"},
      {"{{ raise_exception(['x' * 1000000] * 100000) }}", "printing a list: the result exceeds"},
      {"{{ ((['x' * 1000000] * 100000) ~ '')|length }}", "'~': the result exceeds the limit of 67108864 bytes"},
      {"{{ (('x' * 35000000) ~ ('y' * 35000000))|length }}", "'~': the result exceeds"},
      {"{{ (('x' * 35000000) + ('y' * 35000000))|length }}", "'+': the result exceeds the limit of 67108864 bytes"},
      {"{{ (['x' * 1000000] * 100000)|tojson|length }}", "tojson: the result exceeds the limit of 67108864 bytes"},
      {"{{ {'k': ['x' * 1000000] * 100000}|tojson(indent=2)|length }}", "tojson: the result exceeds"},
      {"{{ (['x' * 1000000] * 100000)|join|length }}", "join: the result exceeds the limit of 67108864 bytes"},
      {"{{ ''.join(['x' * 1000000] * 100000)|length }}", "str.join(): the result exceeds the limit of 67108864 bytes"},
      {"{{ ('x' * 1000)|replace('', 'y' * 1000000)|length }}", "replace: the result exceeds the limit of 67108864 bytes"},
      {"{{ ('x' * 1000).replace('x', 'y' * 1000000)|length }}", "str.replace(): the result exceeds"},
      {"{{ ('\\n' * 100000)|indent('x' * 1000000, blank=true)|length }}", "indent: the result exceeds"},
      {"{{ 'x'.center(9223372036854775807, '\u00e9')|length }}", "str.center(): the result exceeds the limit"},
      {"{{ 'x'.ljust(67108864, '\u00e9')|length }}", "str.ljust(): the result exceeds the limit"},
      {"{{ ([1] * 10000000)|length }}", "'*': the result exceeds 8388608 items"},
  };
  for (const auto& [source, expect] : cases) expect_render_error(source, expect, 10.0);
  // What only names a value in a message is cut short: jinja2 would put all of it there.
  auto hint = ChatTemplate::parse("{{ [1][['x' * 1000000] * 100000] is defined }}", "tmpl");
  ASSERT_TRUE(hint.ok());
  EXPECT_EQ(*hint->render(ojson::object()), "False");
  auto index = ChatTemplate::parse("{{ [1].index(['x' * 1000000] * 100000) }}", "tmpl");
  ASSERT_TRUE(index.ok());
  auto missing = index->render(ojson::object());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("['xxxx"), std::string::npos);
  EXPECT_NE(missing.status().message().find("... is not in list"), std::string::npos) << missing.status().message();
  EXPECT_LT(missing.status().message().size(), 1000u);
}

sy::StatusOr<std::string> render_with_limits(const std::string& source, const ojson& context,
                                             const jinja::RenderLimits& limits) {
  auto t = jinja::parse_template(source, "tmpl");
  if (!t.ok()) return t.status();
  return jinja::render(*t, jinja::Value::from_json(context), limits);
}

// jinja2 3.1.6's output for each (transformers' environment), rendered with a limit on one value
// of exactly its size, then of one byte less, where the builtin building it must be the one to
// refuse. Checking as the result grows changes nothing below the limit.
TEST(ChatTemplate, ResultsUpToTheLimitMatchJinja2) {
  const ojson context = {{"l", {"ab", "c'd", {2.5, true, nullptr}}},
                         {"d", {{"k", "v\u00e9"}, {"n", {1, "two"}}}},
                         {"s", "a\nb\n\nc"}};
  struct Case {
    const char* source;
    const char* output;
    const char* what;
  };
  const Case cases[] = {
      {"{{ l }}", "['ab', \"c'd\", [2.5, True, None]]", "printing a list"},
      {"{{ d }}", "{'k': 'v\u00e9', 'n': [1, 'two']}", "printing a dict"},
      {"{{ l|string }}", "['ab', \"c'd\", [2.5, True, None]]", "printing a list"},
      {"{{ l ~ d }}", "['ab', \"c'd\", [2.5, True, None]]{'k': 'v\u00e9', 'n': [1, 'two']}", "'~'"},
      {"{{ l|tojson }}", "[\"ab\", \"c'd\", [2.5, true, null]]", "tojson"},
      {"{{ d|tojson(indent=2) }}", "{\n  \"k\": \"v\u00e9\",\n  \"n\": [\n    1,\n    \"two\"\n  ]\n}", "tojson"},
      {"{{ d|tojson(ensure_ascii=true) }}", "{\"k\": \"v\\u00e9\", \"n\": [1, \"two\"]}", "tojson"},
      {"{{ l|join(', ') }}", "ab, c'd, [2.5, True, None]", "join"},
      {"{{ '--'.join(['abcdefgh', 'ijklmnopq']) }}", "abcdefgh--ijklmnopq", "str.join()"},
      {"{{ s|replace('\\n', '--') }}", "a--b----c", "replace"},
      {"{{ s.replace('\\n', '--') }}", "a--b----c", "str.replace()"},
      {"{{ s|indent(3, true, true) }}", "   a\n   b\n   \n   c", "indent"},
      {"{{ s|indent('> ') }}", "a\n> b\n\n> c", "indent"},
      {"{{ 'ab'.center(9, '\u00b7') }}", "\u00b7\u00b7\u00b7\u00b7ab\u00b7\u00b7\u00b7", "str.center()"},
      {"{{ 'ab'.zfill(7) }}", "00000ab", "str.zfill()"},
      {"{{ 'ab' * 5 }}", "ababababab", "'*'"},
      {"{{ 'abc' + 'de' }}", "abcde", "'+'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source);
    const std::string output = c.output;
    jinja::RenderLimits limits;
    limits.max_output_bytes = output.size();
    auto at_limit = render_with_limits(c.source, context, limits);
    ASSERT_TRUE(at_limit.ok()) << at_limit.status().message();
    EXPECT_EQ(*at_limit, output);
    limits.max_output_bytes = output.size() - 1;
    auto over = render_with_limits(c.source, context, limits);
    ASSERT_FALSE(over.ok());
    EXPECT_NE(over.status().message().find(std::string(c.what) + ": the result exceeds the limit of " +
                                           std::to_string(output.size() - 1) + " bytes"),
              std::string::npos)
        << over.status().message();
  }
}

// Lists a builtin builds stop at the limit on one list's items before they are built, and what
// map's filter and case-insensitive sort keys compute counts against the render's budget: each
// input here would make 100 GB. A 1 MiB value limit (131072 items) and a 16 MiB budget.
TEST(ChatTemplate, ItemsAndBudgetBoundWhatBuiltinsBuild) {
  jinja::RenderLimits limits;
  limits.max_output_bytes = std::size_t{1} << 20;
  limits.max_value_bytes = std::size_t{16} << 20;
  const std::pair<const char*, const char*> cases[] = {
      {"{{ (['x' * 1000000] * 100000)|map('string')|list|length }}", "template exceeded its budget of 16777216 bytes"},
      {"{{ (['X' * 1000000] * 100000)|unique|list|length }}", "template exceeded its budget of 16777216 bytes"},
      {"{{ (['X' * 1000000] * 100000)|sort|length }}", "template exceeded its budget of 16777216 bytes"},
      {"{{ d|dictsort(by='value')|length }}", "template exceeded its budget of 16777216 bytes"},
      {"{{ ('x' * 1000000)|list|length }}", "the characters of a string: the result exceeds 131072 items"},
      {"{% for c in 'x' * 1000000 %}{% endfor %}", "the characters of a string: the result exceeds 131072 items"},
      {"{{ (' ' * 1000000).split(' ')|length }}", "str.split(): the result exceeds 131072 items"},
      {"{{ (' ' * 1000000).rsplit(' ', 999999)|length }}", "str.rsplit(): the result exceeds 131072 items"},
      {"{{ ('\\n' * 1000000).splitlines()|length }}", "str.splitlines(): the result exceeds 131072 items"},
      {"{{ (([1] * 100000) + ([1] * 100000))|length }}", "'+': the result exceeds 131072 items"},
      {"{{ ([1, 2] * 100000)|length }}", "'*': the result exceeds 131072 items"},
  };
  // 20 values of 1 MB: dictsort by value lowercases each.
  ojson context = {{"d", ojson::object()}};
  for (int i = 0; i < 20; ++i) context["d"]["k" + std::to_string(i)] = std::string(1000000, 'X');
  for (const auto& [source, expect] : cases) {
    auto out = render_with_limits(source, context, limits);
    ASSERT_FALSE(out.ok()) << source;
    EXPECT_NE(out.status().message().find(expect), std::string::npos) << source << ": " << out.status().message();
  }
  // first and last of a string need no list of its characters: a string may have more.
  for (const auto& [source, expect] : {std::pair{"{{ ('x' * 1000000 ~ '\u00e9')|last }}", "\u00e9"},
                                       std::pair{"{{ ('\u00e9' ~ 'x' * 1000000)|first }}", "\u00e9"},
                                       std::pair{"{{ ('x' * 1000000 ~ 'y')|last }}", "y"}}) {
    auto out = render_with_limits(source, context, limits);
    ASSERT_TRUE(out.ok()) << source << ": " << out.status().message();
    EXPECT_EQ(*out, expect) << source;
  }
  // A dict's items, keys and values are lists too: 3 items at a 24-byte limit, 2 at 16.
  const char* dict_lists[] = {"{{ d|items|list|length }}", "{{ d|dictsort|length }}", "{{ d.items()|length }}",
                              "{{ d.keys()|length }}", "{{ d|list|length }}"};
  const ojson small = {{"d", {{"a", 1}, {"b", 2}, {"c", 3}}}};
  for (const char* source : dict_lists) {
    limits.max_output_bytes = 24;
    auto fits = render_with_limits(source, small, limits);
    ASSERT_TRUE(fits.ok()) << source << ": " << fits.status().message();
    EXPECT_EQ(*fits, "3");
    limits.max_output_bytes = 16;
    auto over = render_with_limits(source, small, limits);
    ASSERT_FALSE(over.ok()) << source;
    EXPECT_NE(over.status().message().find("the result exceeds 2 items"), std::string::npos)
        << source << ": " << over.status().message();
  }
}

class ModelDir : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sy_chat_template_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::string render(const ChatTemplate& t) {
    auto out = t.render(ojson{{"messages", ojson::array({{{"role", "user"}, {"content", "hi"}}})}});
    EXPECT_TRUE(out.ok()) << out.status().message();
    return out.ok() ? *out : "";
  }
  fs::path dir_;
};

TEST_F(ModelDir, ChatTemplateStringInTokenizerConfig) {
  write("tokenizer_config.json", R"({"eos_token": "</s>", "chat_template": "A{{ messages[0].content }}"})");
  auto t = ChatTemplate::load(dir_);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(render(*t), "Ahi");
}

// As transformers (test_chat_template_file_priority): the file clobbers the config's template.
TEST_F(ModelDir, ChatTemplateJinjaWinsOverTheConfig) {
  write("tokenizer_config.json", R"({"eos_token": "</s>", "chat_template": "A{{ messages[0].content }}"})");
  write("chat_template.jinja", "B{{ messages[0].content }}");
  auto t = ChatTemplate::load(dir_);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(render(*t), "Bhi");
  EXPECT_EQ(t->origin(), (dir_ / "chat_template.jinja").string());
}

TEST_F(ModelDir, NamedTemplatesTakeDefault) {
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ messages|length }}"}]})");
  auto t = ChatTemplate::load(dir_);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(render(*t), "D1");
  write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"}]})");
  auto none = ChatTemplate::load(dir_);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("without a \"default\""), std::string::npos) << none.status().message();
}

TEST_F(ModelDir, ChatTemplateJinjaBesideTheConfig) {
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  write("chat_template.jinja", "J{{ messages[0].role }}\n");
  auto t = ChatTemplate::load(dir_);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(render(*t), "Juser");
}

TEST_F(ModelDir, MissingOrBrokenTemplateIsAnError) {
  auto none = ChatTemplate::load(dir_);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no chat template"), std::string::npos) << none.status().message();
  write("tokenizer_config.json", R"({"chat_template": "{% if %}"})");
  auto bad = ChatTemplate::load(dir_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tokenizer_config.json chat_template:1:"), std::string::npos)
      << bad.status().message();
  write("tokenizer_config.json", "{not json");
  EXPECT_FALSE(ChatTemplate::load(dir_).ok());
}

// transformers' continue_final_message: the rendering cut after the final message's last
// occurrence; where the template trimmed its trailing whitespace, after the stripped text.
TEST(CutAfterFinalMessage, CutsAsTransformersDoes) {
  const auto cut = [](const std::string& rendered, const std::string& content) {
    auto r = sy::text::cut_after_final_message(rendered, content);
    return r.ok() ? *r : "error: " + r.status().message();
  };
  EXPECT_EQ(cut("<u>hi</u><a>Ok! go:</a>", "Ok! go:"), "<u>hi</u><a>Ok! go:");
  EXPECT_EQ(cut("<u>hi</u><a>hi</a>", "hi"), "<u>hi</u><a>hi");            // the last occurrence
  EXPECT_EQ(cut("<a>Ok \n</a>", "Ok \n"), "<a>Ok \n");                    // kept as given
  EXPECT_EQ(cut("<a>Ok</a>", "Ok  \n"), "<a>Ok");                          // trailing space trimmed
  EXPECT_EQ(cut("<a>  Ok</a>", "  Ok"), "<a>  Ok");                         // leading space
  EXPECT_EQ(cut("<a>x</a>", ""), "<a>x</a>");                               // nothing to cut at
  EXPECT_NE(cut("<a>abc</a>", "xyz").find("does not appear"), std::string::npos);
}

}  // namespace
