// Reads deployment layouts from the TOML format documented in layouts/README.md.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "base/status.h"
#include "engine/model/model_config.h"
#include "engine/runtime/layout.h"

namespace sy {

// Parses layout TOML; `source` names the text in messages ("layouts/x.toml:12: ..."). Refuses
// syntax errors, unknown keys, wrong types, unknown or duplicate devices, bad expert or block
// ids, experts placed nowhere, devices without a role and bad policy or capacity values.
StatusOr<Layout> parse_layout(std::string_view text, const std::string& source, const ModelConfig& config);
StatusOr<Layout> load_layout(const std::filesystem::path& path, const ModelConfig& config);

}  // namespace sy
