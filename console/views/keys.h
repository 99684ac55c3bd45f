// Keyboard indices the views read from ImGuiIO::KeysDown (ImGui 1.86's old input API): letters
// and digits are their upper-case ASCII codes; the rest are listed here. The Qt glue fills them.
#pragma once

namespace sy::console::keys {

inline constexpr int kTab = 256;
inline constexpr int kLeft = 257;
inline constexpr int kRight = 258;
inline constexpr int kUp = 259;
inline constexpr int kDown = 260;
inline constexpr int kPageUp = 261;
inline constexpr int kPageDown = 262;
inline constexpr int kHome = 263;
inline constexpr int kEnd = 264;
inline constexpr int kInsert = 265;
inline constexpr int kDelete = 266;
inline constexpr int kBackspace = 267;
inline constexpr int kSpace = 268;
inline constexpr int kEnter = 269;
inline constexpr int kEscape = 270;
inline constexpr int kKeypadEnter = 271;
inline constexpr int kPlus = 272;
inline constexpr int kMinus = 273;

// Fills io.KeyMap so that ImGui's own widgets (text fields, tables) find their keys.
void install_key_map();

}  // namespace sy::console::keys
