// Frame time of the console's timeline with 1,000,000 spans over 8 devices at several zoom
// levels: the CPU time to build one ImGui frame (level-of-detail queries, draw lists,
// ImGui::Render) and, with --gl, to render it with the console's OpenGL3 backend into an
// offscreen framebuffer (glFinish included; needs a display, e.g. under xvfb-run). Prints a table.
//
//   build/bin/bench_console_frame [--spans N] [--frames N] [--gl]
#include <QGuiApplication>
#include <QOffscreenSurface>
#include <QOpenGLContext>
#include <QOpenGLFramebufferObject>
#include <QOpenGLFunctions>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <memory>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "console/model/console_model.h"
#include "console/model/time_format.h"
#include "console/views/timeline_view.h"
#include "console/views/view_state.h"

namespace {

using sy::telemetry::Lane;
using sy::telemetry::Span;
using sy::telemetry::SpanKind;
using sy::telemetry::StallReason;

// A busy 8-device cluster: compute lanes of attention/expert executions with short stalls between,
// transfers on the send and receive lanes, 60% of the spans on compute.
void fill(sy::console::ConsoleModel& model, std::size_t total) {
  constexpr int kDevices = 8;
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<std::int64_t> exec(20'000, 200'000), gap(0, 30'000), xfer(5'000, 60'000);
  const std::size_t per_device = total / kDevices;
  for (int d = 0; d < kDevices; ++d) {
    const std::size_t compute = per_device * 6 / 10;
    const std::size_t transfers = (per_device - compute) / 2;
    std::int64_t t = 0;
    for (std::size_t i = 0; i < compute; ++i) {
      Span s;
      s.device = d;
      s.lane = Lane::Compute;
      const std::int64_t g = gap(rng);
      if (i % 3 == 2 && g > 10'000) {
        s.kind = SpanKind::Stall;
        s.stall_reason = static_cast<StallReason>(1 + i % 3);
        s.start_ns = t;
        s.end_ns = t + g;
      } else {
        s.kind = d < 4 ? SpanKind::Attention : SpanKind::Expert;
        s.block = static_cast<std::int32_t>(i % 32);
        s.index = static_cast<std::int32_t>(i % 8);
        s.tokens = static_cast<std::int64_t>(16 + i % 200);
        s.start_ns = t;
        s.end_ns = t + exec(rng);
      }
      t = s.end_ns;
      model.add_span(s);
    }
    const std::int64_t run = t;
    for (Lane lane : {Lane::Send}) {  // each transfer also shows on its peer's receive lane
      std::int64_t u = 0;
      const std::int64_t step = run / static_cast<std::int64_t>(transfers);
      for (std::size_t i = 0; i < transfers; ++i) {
        Span s;
        s.device = d;
        s.lane = lane;
        s.kind = SpanKind::Transfer;
        s.peer = (d + 4) % kDevices;
        s.tokens = 64;
        s.start_ns = u;
        s.end_ns = u + std::min(xfer(rng), step);
        u += step;
        model.add_span(s);
      }
    }
  }
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t spans = 1'000'000;
  int frames = 200;
  bool gl = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gl") == 0) {
      gl = true;
    } else if (i + 1 < argc && std::strcmp(argv[i], "--spans") == 0) {
      spans = std::strtoull(argv[++i], nullptr, 10);
    } else if (i + 1 < argc && std::strcmp(argv[i], "--frames") == 0) {
      frames = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--spans N] [--frames N] [--gl]\n", argv[0]);
      return 2;
    }
  }
  // --gl: a real GL context (Qt's, as in the console) and an offscreen framebuffer.
  std::unique_ptr<QGuiApplication> app;
  std::unique_ptr<QOpenGLContext> context;
  std::unique_ptr<QOffscreenSurface> surface;
  std::unique_ptr<QOpenGLFramebufferObject> fbo;
  if (gl) {
    static int qt_argc = 1;
    static char qt_arg0[] = "bench_console_frame";
    static char* qt_argv[] = {qt_arg0, nullptr};
    app = std::make_unique<QGuiApplication>(qt_argc, qt_argv);
    context = std::make_unique<QOpenGLContext>();
    surface = std::make_unique<QOffscreenSurface>();
    if (!context->create()) {
      std::fprintf(stderr, "bench_console_frame: error: no OpenGL context (run under xvfb-run)\n");
      return 1;
    }
    surface->setFormat(context->format());
    surface->create();
    context->makeCurrent(surface.get());
    fbo = std::make_unique<QOpenGLFramebufferObject>(1600, 900);
    fbo->bind();
  }
  sy::console::ConsoleModel model;
  model.set_bounded(false);
  fill(model, spans);

  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(1600, 900);
  io.DeltaTime = 1.0f / 60.0f;
  const char* font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
  if (std::filesystem::exists(font)) io.Fonts->AddFontFromFileTTF(font, 14.0f);
  unsigned char* pixels = nullptr;
  int w = 0, h = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);  // builds the atlas, as the GL backend would
  if (gl) ImGui_ImplOpenGL3_Init("#version 130");

  std::printf("timeline frame time, %s spans over %d devices (%s of run time), %.0fx%.0f px, %d frames per row\n",
              sy::console::format_count(static_cast<double>(model.spans().size())).c_str(), model.device_count(),
              sy::console::format_duration(model.end_ns() - model.begin_ns()).c_str(), io.DisplaySize.x, io.DisplaySize.y,
              frames);
  if (gl)
    std::printf("OpenGL: %s\n", reinterpret_cast<const char*>(context->functions()->glGetString(GL_RENDERER)));
  std::printf("%-12s %10s %10s %10s %12s %9s %9s %10s\n", "visible", "mean ms", "p50 ms", "p99 ms",
              gl ? "GL p50 ms" : "", "items", "folded", "spans");

  sy::console::TimelineView view;
  const std::int64_t mid = (model.begin_ns() + model.end_ns()) / 2;
  const std::int64_t full = model.end_ns() - model.begin_ns();
  for (std::int64_t range : {full, std::int64_t{1'000'000'000}, std::int64_t{100'000'000}, std::int64_t{10'000'000},
                             std::int64_t{1'000'000}, std::int64_t{100'000}}) {
    sy::console::ViewState state;
    state.live = false;
    state.follow_live = false;
    state.view_t0_ns = mid - range / 2;
    state.view_t1_ns = mid + range / 2;
    std::vector<double> ms, gl_ms;
    for (int f = 0; f < frames + 10; ++f) {
      state.view_t0_ns = mid - range / 2;  // the view may not move between frames
      state.view_t1_ns = mid + range / 2;
      const auto t0 = std::chrono::steady_clock::now();
      ImGui::NewFrame();
      ImGui::SetNextWindowPos(ImVec2(0, 0));
      ImGui::SetNextWindowSize(io.DisplaySize);
      ImGui::Begin("##root", nullptr, ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoSavedSettings);
      view.draw(model, state);
      ImGui::End();
      ImGui::Render();
      const auto t1 = std::chrono::steady_clock::now();
      if (f >= 10) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      if (gl) {
        ImGui_ImplOpenGL3_NewFrame();
        QOpenGLFunctions* f_gl = context->functions();
        f_gl->glClear(GL_COLOR_BUFFER_BIT);
        ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
        f_gl->glFinish();
        const auto t2 = std::chrono::steady_clock::now();
        if (f >= 10) gl_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
    }
    double mean = 0;
    for (double v : ms) mean += v;
    mean /= static_cast<double>(ms.size());
    const auto& stats = view.last_frame();
    char gl_column[32] = "";
    if (gl) std::snprintf(gl_column, sizeof gl_column, "%.3f", percentile(gl_ms, 0.5));
    std::printf("%-12s %10.3f %10.3f %10.3f %12s %9zu %9zu %10zu\n", sy::console::format_duration(range).c_str(), mean,
                percentile(ms, 0.5), percentile(ms, 0.99), gl_column, stats.items, stats.folded_items,
                stats.spans_in_view);
  }
  if (gl) ImGui_ImplOpenGL3_Shutdown();
  ImGui::DestroyContext();
  return 0;
}
