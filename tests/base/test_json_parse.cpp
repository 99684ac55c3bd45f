#include "base/json_parse.h"

#include <gtest/gtest.h>

#include <string>

namespace sy {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(ParseJson, ParsesValidDocuments) {
  auto doc = parse_json(R"({"a": [1, 2.5, "x"], "b": null, "c": 1e308})");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ((*doc)["a"][1], 2.5);
  EXPECT_TRUE((*doc)["b"].is_null());
}

TEST(ParseJson, SyntaxErrorsSayWhereWithoutTheExceptionId) {
  auto doc = parse_json("{\"a\": ");
  ASSERT_FALSE(doc.ok());
  EXPECT_TRUE(contains(doc.status().message(), "syntax error")) << doc.status().message();
  EXPECT_FALSE(contains(doc.status().message(), "[json.exception")) << doc.status().message();
}

// nlohmann reports these as out_of_range, which once escaped every caller's catch.
TEST(ParseJson, NumbersBeyondADoubleAreErrors) {
  for (const char* text : {"1e400", "[-1e400]", R"({"x": 1E+99999})", "123456789e999"}) {
    auto doc = parse_json(text);
    ASSERT_FALSE(doc.ok()) << text;
    EXPECT_TRUE(contains(doc.status().message(), "range of a double")) << doc.status().message();
    EXPECT_FALSE(contains(doc.status().message(), "[json.exception")) << doc.status().message();
  }
  // Huge integers fall back to doubles and stay finite: not an error.
  EXPECT_TRUE(parse_json("123456789012345678901234567890").ok());
}

TEST(ParseJson, EmptyAndTrailingInputAreErrors) {
  EXPECT_FALSE(parse_json("").ok());
  EXPECT_FALSE(parse_json("{} {}").ok());
  EXPECT_FALSE(parse_json(std::string("{\"a\":\"\0\"}", 9)).ok());
}

}  // namespace
}  // namespace sy
