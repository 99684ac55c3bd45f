#include <gtest/gtest.h>

#include "engine/cli/cli_support.h"

namespace sy::cli {
namespace {

TEST(TokenList, ParsesCommaSeparatedIds) {
  auto r = parse_token_list("1, 2,30");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<std::int32_t>{1, 2, 30}));
}

TEST(TokenList, NamesTheBadElement) {
  for (const char* bad : {"1,,2", "1,2a", "", "1,99999999999"}) {
    auto r = parse_token_list(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--tokens"), std::string::npos);
  }
  EXPECT_NE(parse_token_list("4,five").status().message().find("'five'"), std::string::npos);
}

}  // namespace
}  // namespace sy::cli
