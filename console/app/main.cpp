// switchyard-console: the operator console (docs/console.md).
#include <QApplication>
#include <QStringList>
#include <QSurfaceFormat>
#include <QTimer>
#include <atomic>
#include <csignal>
#include <cstdio>

#include "console/app/command_line.h"
#include "console/app/main_window.h"
#include "console/app/theme.h"

namespace {

// SIGTERM (the demo stopping its console) and SIGINT close the window normally, so that the
// layout is saved and the connection shut down; the handler only sets a flag.
std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  QApplication::setOrganizationName("switchyard");
  QApplication::setApplicationName("console");
  QApplication::setApplicationVersion("0.1.0");
  // Parsed before QApplication exists, which aborts without a display: --help, --version and
  // a mistake on the command line need none. (Qt's own -platform and the like are therefore
  // unknown flags; its environment variables, e.g. QT_QPA_PLATFORM, still apply.)
  QStringList arguments;
  for (int i = 0; i < argc; ++i) arguments << QString::fromLocal8Bit(argv[i]);
  int exit_code = 0;
  const auto options = sy::console::parse_command_line(arguments, exit_code);
  if (!options) return exit_code;

  // Docks can float and re-dock: their GL widgets then share one context group.
  QApplication::setAttribute(Qt::AA_ShareOpenGLContexts);
  QApplication app(argc, argv);
  sy::console::apply_dark_theme(app);

  sy::console::MainWindow window;
  window.show();
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  QTimer stop_watch;
  QObject::connect(&stop_watch, &QTimer::timeout, &window, [&window] {
    if (g_stop.load()) window.close();
  });
  stop_watch.start(100);
  if (options->connect) {
    const auto st = window.connectTo(*options->connect);
    if (!st.ok()) {
      std::fprintf(stderr, "switchyard-console: error: %s\n", st.message().c_str());
      if (options->quit) return 1;
    }
  }
  if (!options->open.isEmpty()) {
    const auto st = window.openTrace(options->open);
    if (!st.ok()) {
      std::fprintf(stderr, "switchyard-console: error: %s\n", st.message().c_str());
      if (options->quit) return 1;
    }
  }
  if (!options->screenshot.isEmpty()) {
    QTimer::singleShot(sy::console::after_milliseconds(*options), &window, [&window, options] {
      const auto st = window.saveScreenshot(options->screenshot);
      if (st.ok())
        std::printf("switchyard-console: wrote %s\n", qPrintable(options->screenshot));
      else
        std::fprintf(stderr, "switchyard-console: error: %s\n", st.message().c_str());
      std::fflush(stdout);
      if (options->quit) QApplication::exit(st.ok() ? 0 : 1);
    });
  } else if (options->quit) {
    QTimer::singleShot(sy::console::after_milliseconds(*options), &window, [] { QApplication::exit(0); });
  }
  return QApplication::exec();
}
