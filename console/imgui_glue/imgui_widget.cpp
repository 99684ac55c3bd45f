#include "console/imgui_glue/imgui_widget.h"

#include <filesystem>

#include <QKeyEvent>
#include <QMouseEvent>
#include <QOpenGLContext>
#include <QOpenGLFunctions>
#include <QWheelEvent>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include "console/views/keys.h"
#include "console/views/palette.h"

namespace sy::console {
namespace {

int button_index(Qt::MouseButton b) {
  switch (b) {
    case Qt::LeftButton: return 0;
    case Qt::RightButton: return 1;
    case Qt::MiddleButton: return 2;
    case Qt::BackButton: return 3;
    case Qt::ForwardButton: return 4;
    default: return -1;
  }
}

void load_font(ImGuiIO& io) {
  // DejaVu Sans is a Debian dependency of the console (scripts/build.sh); ImGui's built-in
  // bitmap font is the fallback.
  for (const char* path : {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                           "/usr/share/fonts/dejavu/DejaVuSans.ttf"}) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) {
      if (io.Fonts->AddFontFromFileTTF(path, 14.0f) != nullptr) return;
    }
  }
  io.Fonts->AddFontDefault();
}

}  // namespace

int imgui_key_index(int qt_key) {
  if (qt_key >= Qt::Key_A && qt_key <= Qt::Key_Z) return 'A' + (qt_key - Qt::Key_A);
  if (qt_key >= Qt::Key_0 && qt_key <= Qt::Key_9) return '0' + (qt_key - Qt::Key_0);
  switch (qt_key) {
    case Qt::Key_Tab: return keys::kTab;
    case Qt::Key_Left: return keys::kLeft;
    case Qt::Key_Right: return keys::kRight;
    case Qt::Key_Up: return keys::kUp;
    case Qt::Key_Down: return keys::kDown;
    case Qt::Key_PageUp: return keys::kPageUp;
    case Qt::Key_PageDown: return keys::kPageDown;
    case Qt::Key_Home: return keys::kHome;
    case Qt::Key_End: return keys::kEnd;
    case Qt::Key_Insert: return keys::kInsert;
    case Qt::Key_Delete: return keys::kDelete;
    case Qt::Key_Backspace: return keys::kBackspace;
    case Qt::Key_Space: return keys::kSpace;
    case Qt::Key_Return: return keys::kEnter;
    case Qt::Key_Enter: return keys::kKeypadEnter;
    case Qt::Key_Escape: return keys::kEscape;
    case Qt::Key_Plus:
    case Qt::Key_Equal: return keys::kPlus;
    case Qt::Key_Minus:
    case Qt::Key_Underscore: return keys::kMinus;
    default: return -1;
  }
}

ImGuiWidget::ImGuiWidget(QWidget* parent) : QOpenGLWidget(parent) {
  setFocusPolicy(Qt::StrongFocus);
  setMouseTracking(true);
  setMinimumSize(120, 80);
  clock_.start();
}

ImGuiWidget::~ImGuiWidget() {
  cleanupGL();
  // QOpenGLWidget's destructor, which runs after this one, destroys the GL context, and the
  // context's aboutToBeDestroyed would call cleanupGL on a widget that is no longer one (Qt's
  // hellogl2 example disconnects likewise; a debug Qt asserts, UBSan reports the downcast).
  if (QOpenGLContext* c = context()) disconnect(c, &QOpenGLContext::aboutToBeDestroyed, this, &ImGuiWidget::cleanupGL);
  if (context_ != nullptr) ImGui::DestroyContext(context_);
}

void ImGuiWidget::makeContextCurrent() { ImGui::SetCurrentContext(context_); }

void ImGuiWidget::initializeGL() {
  if (context_ == nullptr) {
    context_ = ImGui::CreateContext();
    makeContextCurrent();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // Qt keeps the layout (QSettings); ImGui keeps nothing on disk
    io.ConfigWindowsMoveFromTitleBarOnly = true;
    keys::install_key_map();
    load_font(io);
    ImGui::StyleColorsDark();
    ImGuiStyle& style = ImGui::GetStyle();
    style.WindowPadding = ImVec2(6, 6);
    style.FrameRounding = 2;
    style.Colors[ImGuiCol_WindowBg] = ImGui::ColorConvertU32ToFloat4(palette::kBackground);
    style.Colors[ImGuiCol_ChildBg] = ImGui::ColorConvertU32ToFloat4(palette::kBackground);
  }
  makeContextCurrent();
  // A QOpenGLWidget gets a new GL context when its dock is floated or re-docked; the backend's
  // objects belong to the old one.
  connect(context(), &QOpenGLContext::aboutToBeDestroyed, this, &ImGuiWidget::cleanupGL, Qt::UniqueConnection);
  // Qt's default context is a compatibility profile that accepts GLSL 1.30.
  backend_ready_ = ImGui_ImplOpenGL3_Init("#version 130");
}

void ImGuiWidget::cleanupGL() {
  if (!backend_ready_ || context_ == nullptr) return;
  makeCurrent();
  makeContextCurrent();
  ImGui_ImplOpenGL3_Shutdown();
  backend_ready_ = false;
  doneCurrent();
}

void ImGuiWidget::requestFrames(int frames) {
  frames_requested_ = std::max(frames_requested_, frames);
  update();
}

void ImGuiWidget::paintGL() {
  if (!backend_ready_) return;
  makeContextCurrent();
  ImGuiIO& io = ImGui::GetIO();
  const qint64 now = clock_.nsecsElapsed();
  io.DeltaTime = last_frame_ns_ == 0 ? 1.0f / 60.0f : std::max(1e-4f, static_cast<float>(now - last_frame_ns_) / 1e9f);
  last_frame_ns_ = now;
  io.DisplaySize = ImVec2(static_cast<float>(width()), static_cast<float>(height()));
  const auto ratio = static_cast<float>(devicePixelRatioF());
  io.DisplayFramebufferScale = ImVec2(ratio, ratio);
  for (std::size_t b = 0; b < button_down_.size(); ++b) io.MouseDown[b] = button_down_[b];
  for (std::size_t k = 0; k < key_down_.size(); ++k) io.KeysDown[k] = key_down_[k];

  QElapsedTimer build;
  build.start();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui::NewFrame();
  button_pressed_unseen_.fill(false);
  key_pressed_unseen_.fill(false);
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(io.DisplaySize);
  ImGuiWindowFlags flags = ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                           ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                           ImGuiWindowFlags_NoBringToFrontOnFocus;
  if (!wheel_scrolls_) flags |= ImGuiWindowFlags_NoScrollWithMouse | ImGuiWindowFlags_NoScrollbar;
  ImGui::Begin("##root", nullptr, flags);
  if (draw_) draw_();
  ImGui::End();
  ImGui::Render();
  build_ms_ = static_cast<double>(build.nsecsElapsed()) / 1e6;

  QElapsedTimer render;
  render.start();
  QOpenGLFunctions* gl = context()->functions();
  const ImVec4 bg = ImGui::ColorConvertU32ToFloat4(palette::kBackground);
  gl->glClearColor(bg.x, bg.y, bg.z, 1.0f);
  gl->glClear(GL_COLOR_BUFFER_BIT);
  // Qt has bound the widget's own framebuffer; the backend draws into whatever is bound.
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  render_ms_ = static_cast<double>(render.nsecsElapsed()) / 1e6;
  ++frames_;

  // Releases held back from the frame that saw the press take effect now.
  bool more = false;
  for (std::size_t b = 0; b < button_down_.size(); ++b)
    if (button_release_held_[b]) {
      button_down_[b] = button_release_held_[b] = false;
      more = true;
    }
  for (std::size_t k = 0; k < key_down_.size(); ++k)
    if (key_release_held_[k]) {
      key_down_[k] = key_release_held_[k] = false;
      more = true;
    }
  if (frames_requested_ > 0) {
    --frames_requested_;
    more = true;
  }
  if (more) update();
}

void ImGuiWidget::setButton(int button, bool down) {
  if (button < 0) return;
  const auto b = static_cast<std::size_t>(button);
  if (down) {
    button_down_[b] = true;
    button_pressed_unseen_[b] = true;
    button_release_held_[b] = false;
  } else if (button_pressed_unseen_[b]) {
    button_release_held_[b] = true;
  } else {
    button_down_[b] = false;
  }
  requestFrames();
}

void ImGuiWidget::setKey(int key, bool down) {
  if (key < 0 || key >= static_cast<int>(key_down_.size())) return;
  const auto k = static_cast<std::size_t>(key);
  if (down) {
    key_down_[k] = true;
    key_pressed_unseen_[k] = true;
    key_release_held_[k] = false;
  } else if (key_pressed_unseen_[k]) {
    key_release_held_[k] = true;
  } else {
    key_down_[k] = false;
  }
  requestFrames();
}

void ImGuiWidget::updateModifiers(Qt::KeyboardModifiers modifiers) {
  if (context_ == nullptr) return;
  makeContextCurrent();
  ImGuiIO& io = ImGui::GetIO();
  io.KeyCtrl = modifiers.testFlag(Qt::ControlModifier);
  io.KeyShift = modifiers.testFlag(Qt::ShiftModifier);
  io.KeyAlt = modifiers.testFlag(Qt::AltModifier);
  io.KeySuper = modifiers.testFlag(Qt::MetaModifier);
}

void ImGuiWidget::mousePressEvent(QMouseEvent* event) {
  if (context_ == nullptr) return;
  makeContextCurrent();
  ImGui::GetIO().MousePos = ImVec2(static_cast<float>(event->position().x()), static_cast<float>(event->position().y()));
  updateModifiers(event->modifiers());
  setButton(button_index(event->button()), true);
  setFocus(Qt::MouseFocusReason);
}

void ImGuiWidget::mouseReleaseEvent(QMouseEvent* event) {
  if (context_ == nullptr) return;
  updateModifiers(event->modifiers());
  setButton(button_index(event->button()), false);
}

void ImGuiWidget::mouseDoubleClickEvent(QMouseEvent* event) {
  // ImGui detects double clicks itself from two presses; Qt sends this in place of the second.
  mousePressEvent(event);
}

void ImGuiWidget::mouseMoveEvent(QMouseEvent* event) {
  if (context_ == nullptr) return;
  makeContextCurrent();
  ImGui::GetIO().MousePos = ImVec2(static_cast<float>(event->position().x()), static_cast<float>(event->position().y()));
  updateModifiers(event->modifiers());
  requestFrames();
}

void ImGuiWidget::wheelEvent(QWheelEvent* event) {
  if (context_ == nullptr) return;
  makeContextCurrent();
  ImGuiIO& io = ImGui::GetIO();
  io.MousePos = ImVec2(static_cast<float>(event->position().x()), static_cast<float>(event->position().y()));
  updateModifiers(event->modifiers());
  // 120 units per notch; touchpads send finer steps.
  io.MouseWheel += static_cast<float>(event->angleDelta().y()) / 120.0f;
  io.MouseWheelH += static_cast<float>(event->angleDelta().x()) / 120.0f;
  event->accept();
  requestFrames();
}

void ImGuiWidget::keyPressEvent(QKeyEvent* event) {
  if (context_ == nullptr) return;
  updateModifiers(event->modifiers());
  setKey(imgui_key_index(event->key()), true);
  const QString text = event->text();
  if (!text.isEmpty() && text.at(0).isPrint() && !event->modifiers().testFlag(Qt::ControlModifier)) {
    makeContextCurrent();
    ImGui::GetIO().AddInputCharactersUTF8(text.toUtf8().constData());
  }
  event->accept();
}

void ImGuiWidget::keyReleaseEvent(QKeyEvent* event) {
  if (context_ == nullptr || event->isAutoRepeat()) return;
  updateModifiers(event->modifiers());
  setKey(imgui_key_index(event->key()), false);
  event->accept();
}

void ImGuiWidget::focusOutEvent(QFocusEvent* event) {
  // Keys released while another widget had focus would otherwise stay down.
  for (std::size_t k = 0; k < key_down_.size(); ++k) key_down_[k] = key_release_held_[k] = false;
  updateModifiers(Qt::NoModifier);
  QOpenGLWidget::focusOutEvent(event);
  requestFrames();
}

void ImGuiWidget::leaveEvent(QEvent* event) {
  if (context_ != nullptr) {
    makeContextCurrent();
    ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
  }
  QOpenGLWidget::leaveEvent(event);
  requestFrames();
}

bool ImGuiWidget::focusNextPrevChild(bool) { return false; }

}  // namespace sy::console
