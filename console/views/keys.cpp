#include "console/views/keys.h"

#include <imgui.h>

namespace sy::console::keys {

void install_key_map() {
  ImGuiIO& io = ImGui::GetIO();
  io.KeyMap[ImGuiKey_Tab] = kTab;
  io.KeyMap[ImGuiKey_LeftArrow] = kLeft;
  io.KeyMap[ImGuiKey_RightArrow] = kRight;
  io.KeyMap[ImGuiKey_UpArrow] = kUp;
  io.KeyMap[ImGuiKey_DownArrow] = kDown;
  io.KeyMap[ImGuiKey_PageUp] = kPageUp;
  io.KeyMap[ImGuiKey_PageDown] = kPageDown;
  io.KeyMap[ImGuiKey_Home] = kHome;
  io.KeyMap[ImGuiKey_End] = kEnd;
  io.KeyMap[ImGuiKey_Insert] = kInsert;
  io.KeyMap[ImGuiKey_Delete] = kDelete;
  io.KeyMap[ImGuiKey_Backspace] = kBackspace;
  io.KeyMap[ImGuiKey_Space] = kSpace;
  io.KeyMap[ImGuiKey_Enter] = kEnter;
  io.KeyMap[ImGuiKey_Escape] = kEscape;
  io.KeyMap[ImGuiKey_KeyPadEnter] = kKeypadEnter;
  io.KeyMap[ImGuiKey_A] = 'A';
  io.KeyMap[ImGuiKey_C] = 'C';
  io.KeyMap[ImGuiKey_V] = 'V';
  io.KeyMap[ImGuiKey_X] = 'X';
  io.KeyMap[ImGuiKey_Y] = 'Y';
  io.KeyMap[ImGuiKey_Z] = 'Z';
}

}  // namespace sy::console::keys
