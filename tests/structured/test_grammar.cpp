// Grammar::check, which a rank applies to a grammar that came over the wire: everything this
// process's compiler makes passes it, and what the matcher could not walk does not.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/structured/grammar.h"
#include "engine/structured/schema_compiler.h"

namespace sy::structured {
namespace {

TEST(GrammarCheck, EveryCompiledGrammarPasses) {
  for (const char* schema : {
           R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})",
           R"({"type": ["string", "null"], "maxLength": 3})",
           R"({"enum": ["x", 1, null, {"k": [1]}]})",
           R"({"anyOf": [{"type": "number"}, {"type": "array", "items": {"$ref": "#/$defs/v"}, "minItems": 1}],
               "$defs": {"v": {"type": "boolean"}}})",
           R"({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"})",
           R"({"type": "object", "additionalProperties": {"type": "boolean"}})",
       }) {
    SCOPED_TRACE(schema);
    auto g = compile_schema(nlohmann::json::parse(schema));
    ASSERT_TRUE(g.ok()) << g.status().message();
    const Status s = (*g)->check();
    EXPECT_TRUE(s.ok()) << s.message();
  }
  EXPECT_TRUE(Grammar::any_object()->check().ok());
  EXPECT_TRUE(Grammar::choice({"a", "b\"c"})->check().ok());  // choices are raw bytes: any
}

TEST(GrammarCheck, RefusesWhatTheMatcherCannotWalk) {
  const auto refused = [](const Grammar& g, const char* expected) {
    const Status s = g.check();
    EXPECT_FALSE(s.ok()) << expected;
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
  };
  refused(Grammar{}, "0 nodes");
  Grammar g = *Grammar::choice({"x"});
  g.root = -1;
  refused(g, "root -1");
  g = *Grammar::any_object();
  g.nodes[0].alternatives.push_back(99);
  refused(g, "alternative node 99");
  g = *Grammar::any_object();
  g.nodes[1].additional = 99;
  refused(g, "additional or items");
  g = *Grammar::choice({"x"});
  g.nodes[0].kind = static_cast<Node::Kind>(7);
  refused(g, "kind 7");
  g = *Grammar::choice({"x"});
  g.nodes[0].properties = {{"a", 0}};
  g.nodes[0].required = 0b10;
  refused(g, "a required property it does not name");
  g.nodes[0].properties = {{"a\nb", 0}};
  g.nodes[0].required = 0;
  refused(g, "control byte");
  g = *Grammar::choice({"x"});
  g.nodes[0].min_items = -1;
  refused(g, "negative bound");
  g = *Grammar::choice({"x"});
  g.nodes[0].properties.assign(kMaxProperties + 1, {"p", 0});
  refused(g, "more than 64 properties");
}

}  // namespace
}  // namespace sy::structured
