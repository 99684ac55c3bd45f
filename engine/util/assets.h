// Where the engine's data files are found at run time: hardware profiles, named model shapes,
// tokenizers and chat templates (assets) and the layout files. Nothing of the source tree is
// compiled in, so an installed binary finds its own copies.
#pragma once

#include <filesystem>

namespace sy {

// The first that holds: $SWITCHYARD_ASSETS; <directory of the running executable>/../share/
// switchyard/assets (an installed prefix, or the build tree, where CMake links it to the
// source tree's assets/). When neither exists the latter is returned, so errors name it.
std::filesystem::path assets_dir();
// $SWITCHYARD_LAYOUTS, else <executable>/../share/switchyard/layouts, likewise.
std::filesystem::path layouts_dir();

}  // namespace sy
