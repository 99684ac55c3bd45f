// The GUI tests' process-wide setup: a private Xvfb, Qt on the xcb platform (Qt 6.4's offscreen
// platform crashes with QOpenGLWidget), settings in a temporary folder, one QApplication.
#pragma once

#include <QApplication>
#include <QImage>
#include <memory>
#include <string>

#include "base/status.h"
#include "console/app/main_window.h"
#include "xvfb_server.h"

namespace sy::console::testing {

// Starts everything on first use; the test fails with the reason if Xvfb cannot start.
QApplication* gui_application();
// A scratch folder for this test process.
std::string scratch_dir();

// Clicks `widget` as a user would: scrolled into view, once a click at its centre lands on it.
// Qt 6 routes a test
// click by window position, and a panel whose widgets just appeared has its layout pending
// (the button is not yet where it will be drawn): waits (running the event loop, up to 20 s)
// for the layout to settle. False, with nothing clicked, when it never does.
bool click_when_settled(QWidget* widget);

// Not blank: the image has real contrast (luminance standard deviation), not one flat colour.
double luminance_stddev(const QImage& image);
// Pixels that are clearly blue (attention spans) and clearly green (expert spans).
struct SpanColours {
  long blue = 0;
  long green = 0;
  long saturated = 0;  // any strongly coloured pixel: spans of every kind, stalls, heat cells
};
SpanColours count_span_colours(const QImage& image);

// Opens the recording at `path` in `w` and draws the timeline's first frame: the seconds that
// took (printed by the tests, never asserted), or why it did not open.
StatusOr<double> open_trace_and_draw(MainWindow& w, const std::string& path);

}  // namespace sy::console::testing
