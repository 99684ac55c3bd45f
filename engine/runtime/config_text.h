// How settings are spelled in messages and written files: the accepted values as a list, the
// key a typo probably meant, and doubles that read back exactly; shared by layout files and live
// policy changes so that both word their refusals alike.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace sy {

// "a, b or c".
std::string one_of(std::initializer_list<std::string_view> items);

// "; did you mean 'x'?" naming the allowed key closest to `key`, or "" when none is close.
std::string did_you_mean(std::string_view key, std::initializer_list<std::string_view> allowed);

// Shortest text that reads back to the same double, always in TOML float syntax ("1.0", not "1").
std::string format_double(double v);

}  // namespace sy
