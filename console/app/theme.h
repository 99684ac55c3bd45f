// The console's look: Qt's Fusion style with a dark palette that matches the ImGui views.
#pragma once

class QApplication;

namespace sy::console {

void apply_dark_theme(QApplication& app);

}  // namespace sy::console
