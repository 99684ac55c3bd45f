#include "gui_environment.h"

#include "console/imgui_glue/imgui_widget.h"

#include <QScrollArea>
#include <QTest>
#include <QWidget>

#include <gtest/gtest.h>
#include <unistd.h>

#include <QDir>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace sy::console::testing {

namespace {
std::unique_ptr<XvfbServer> g_xvfb;
std::unique_ptr<QApplication> g_app;
int g_argc = 1;
char g_arg0[] = "console-gui-test";
char* g_argv[] = {g_arg0, nullptr};

// Tear down Qt before the X server, at the end of the test program rather than at exit.
struct Teardown : ::testing::Environment {
  void TearDown() override {
    g_app.reset();
    g_xvfb.reset();
  }
};
[[maybe_unused]] ::testing::Environment* const g_teardown = ::testing::AddGlobalTestEnvironment(new Teardown);
}  // namespace

std::string scratch_dir() {
  static const std::string dir = [] {
    const auto d = std::filesystem::path(::testing::TempDir()) / ("console_gui_" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

QApplication* gui_application() {
  if (g_app) return g_app.get();
  auto xvfb = XvfbServer::start();
  if (!xvfb.ok()) {
    ADD_FAILURE() << xvfb.status().message();
    return nullptr;
  }
  g_xvfb = std::move(*xvfb);
  setenv("QT_QPA_PLATFORM", "xcb", 1);
  // Settings and caches of the tests stay out of the user's home.
  setenv("XDG_CONFIG_HOME", (scratch_dir() + "/config").c_str(), 1);
  setenv("XDG_RUNTIME_DIR", scratch_dir().c_str(), 1);
  chmod(scratch_dir().c_str(), 0700);
  QApplication::setAttribute(Qt::AA_ShareOpenGLContexts);
  g_app = std::make_unique<QApplication>(g_argc, g_argv);
  QApplication::setOrganizationName("switchyard-test");
  QApplication::setApplicationName("console-test");
  return g_app.get();
}

bool click_when_settled(QWidget* widget) {
  if (widget == nullptr) return false;
  for (int i = 0; i < 400; ++i) {
    // A user scrolls a panel to a button below its fold first.
    for (QWidget* p = widget->parentWidget(); p != nullptr; p = p->parentWidget())
      if (auto* area = qobject_cast<QScrollArea*>(p)) area->ensureWidgetVisible(widget);
    QWidget* window = widget->window();
    QWidget* at = window->childAt(widget->mapTo(window, widget->rect().center()));
    if (widget->isVisible() && widget->isEnabled() && (at == widget || widget->isAncestorOf(at))) {
      QTest::mouseClick(widget, Qt::LeftButton);
      return true;
    }
    QTest::qWait(50);
  }
  return false;
}

double luminance_stddev(const QImage& image) {
  const QImage img = image.convertToFormat(QImage::Format_RGB32);
  double sum = 0, sum2 = 0;
  const double n = static_cast<double>(img.width()) * img.height();
  for (int y = 0; y < img.height(); ++y) {
    const auto* line = reinterpret_cast<const QRgb*>(img.constScanLine(y));
    for (int x = 0; x < img.width(); ++x) {
      const double l = 0.299 * qRed(line[x]) + 0.587 * qGreen(line[x]) + 0.114 * qBlue(line[x]);
      sum += l;
      sum2 += l * l;
    }
  }
  const double mean = sum / n;
  return std::sqrt(std::max(0.0, sum2 / n - mean * mean));
}

SpanColours count_span_colours(const QImage& image) {
  const QImage img = image.convertToFormat(QImage::Format_RGB32);
  SpanColours c;
  for (int y = 0; y < img.height(); ++y) {
    const auto* line = reinterpret_cast<const QRgb*>(img.constScanLine(y));
    for (int x = 0; x < img.width(); ++x) {
      const int r = qRed(line[x]), g = qGreen(line[x]), b = qBlue(line[x]);
      if (b > 110 && b > r + 60 && b > g + 20) ++c.blue;
      if (g > 110 && g > r + 50 && g > b + 30) ++c.green;
      if (std::max({r, g, b}) - std::min({r, g, b}) > 60) ++c.saturated;
    }
  }
  return c;
}

StatusOr<double> open_trace_and_draw(MainWindow& w, const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  const Status st = w.openTrace(QString::fromStdString(path));
  if (!st.ok()) return st;
  auto* timeline = w.findChild<ImGuiWidget*>("timelineView");
  if (timeline == nullptr) return Status::Error("the main window has no timelineView");
  timeline->requestFrames(1);
  QTest::qWait(1);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace sy::console::testing
