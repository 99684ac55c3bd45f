// The console's command line (docs/console.md): what to watch or open at start, and the
// automation used by tests and docs (render, save a screenshot after N seconds, quit).
#pragma once

#include <QString>
#include <QStringList>
#include <optional>

#include "console/app/connection_settings.h"

namespace sy::console {

// The longest --after: a day is more than any automation waits, and keeps seconds * 1000 far
// inside a timer's int milliseconds.
inline constexpr double kMaxAfterSeconds = 86400;

struct CommandLine {
  std::optional<ConnectionSettings> connect;  // --connect [--control] [--server-key --client-key]
  QString open;                               // --open FILE.db
  QString screenshot;                         // --screenshot FILE.png
  double after_seconds = 2.0;                 // --after SECONDS
  bool quit = false;                          // --quit
};

// Parses the arguments (argv[0] first). On an error or --help/--version, returns nullopt after
// printing the message or help (`exit_code` says how to exit). Needs no QApplication, so that
// it runs before one is made (making one needs a display).
std::optional<CommandLine> parse_command_line(const QStringList& arguments, int& exit_code);

// --after as a timer interval (parse_command_line bounds it, so it fits an int).
int after_milliseconds(const CommandLine& c);

}  // namespace sy::console
