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

namespace fs = std::filesystem;
using sy::text::ChatTemplate;
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
  for (const auto& c : cases) {
    auto t = ChatTemplate::parse(c.source, "tmpl");
    ASSERT_TRUE(t.ok()) << t.status().message();
    auto out = t->render(ojson::object());
    ASSERT_FALSE(out.ok()) << c.source;
    EXPECT_NE(out.status().message().find(c.expect), std::string::npos) << out.status().message();
  }
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
      {"{{ 'a'.zfill(100000000000) }}", "exceeds the output limit"},
  };
  for (const auto& [source, expect] : errors) {
    auto t = ChatTemplate::parse(source, "tmpl");
    ASSERT_TRUE(t.ok()) << t.status().message();
    auto out = t->render(ojson::object());
    ASSERT_FALSE(out.ok()) << source;
    EXPECT_NE(out.status().message().find(expect), std::string::npos) << out.status().message();
  }
}

// Each step may copy a string of up to 64 MiB: the byte budget, not the step budget, stops these.
TEST(ChatTemplate, BytesCopiedAreBounded) {
  const char* sources[] = {
      "{% set s = 'x' * 60000000 %}{% for i in range(100000) %}{% set t = s ~ '' %}{% endfor %}",
      "{% set s = 'x' * 60000000 %}{% for i in range(100000) %}{% set t %}{{ s }}{% endset %}{% endfor %}",
      "{% set s = 'x' * 60000000 %}{% for i in range(100000) %}{% if s == s ~ '' %}{% endif %}{% endfor %}",
  };
  for (const char* source : sources) {
    auto t = ChatTemplate::parse(source, "tmpl");
    ASSERT_TRUE(t.ok()) << t.status().message();
    const auto start = std::chrono::steady_clock::now();
    auto out = t->render(ojson::object());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_FALSE(out.ok()) << source;
    EXPECT_NE(out.status().message().find("template exceeded its budget of 1073741824 bytes"), std::string::npos)
        << out.status().message();
    EXPECT_LT(seconds, 10.0) << source;
  }
  // 2^24 * (2^40 + 1) wraps to 2^24 in 64 bits: the count must be compared, not the product.
  auto wrap = ChatTemplate::parse("{{ ('x' * 16777216) * 1099511627777 }}", "tmpl");
  ASSERT_TRUE(wrap.ok());
  auto out = wrap->render(ojson::object());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("repetition result exceeds the output limit"), std::string::npos);
  // join checks its result as it grows: 1000 strings of 60 MB were joined into 60 GB first.
  for (const char* join : {"{{ (['x' * 60000000] * 1000)|join }}", "{{ ''.join(['x' * 60000000] * 1000) }}"}) {
    auto joined = ChatTemplate::parse(join, "tmpl");
    ASSERT_TRUE(joined.ok()) << joined.status().message();
    auto result = joined->render(ojson::object());
    ASSERT_FALSE(result.ok()) << join;
    EXPECT_NE(result.status().message().find("join: the result exceeds the limit of 67108864 bytes"), std::string::npos)
        << result.status().message();
  }
  auto empty = ChatTemplate::parse("{{ ('' * 9223372036854775807)|length }}", "tmpl");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty->render(ojson::object()), "0");
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

}  // namespace
