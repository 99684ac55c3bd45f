// The to_toml round trip the layout tests check: a layout written out reads back equal.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "engine/model/model_config.h"
#include "engine/runtime/layout.h"
#include "engine/runtime/layout_parser.h"

namespace sy::testing {

inline void expect_round_trip(const Layout& layout, const ModelConfig& config) {
  const std::string text = layout.to_toml();
  auto back = parse_layout(text, "round-trip.toml", config);
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  EXPECT_EQ(*back, layout) << text;
}

}  // namespace sy::testing
