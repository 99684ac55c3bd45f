// A QOpenGLWidget that hosts one Dear ImGui 1.86 context: feeds it Qt's mouse, wheel, key and
// text events (the old KeysDown/MouseDown input API) and renders it with ImGui's OpenGL3 backend
// inside paintGL. Each widget owns its context, so views can live in separate docks.
#pragma once

#include <array>
#include <functional>

#include <QElapsedTimer>
#include <QOpenGLWidget>

struct ImGuiContext;

namespace sy::console {

class ImGuiWidget : public QOpenGLWidget {
  Q_OBJECT

 public:
  // Called between ImGui::NewFrame and ImGui::Render, inside a borderless window that fills the
  // widget.
  using DrawFunction = std::function<void()>;

  explicit ImGuiWidget(QWidget* parent = nullptr);
  ~ImGuiWidget() override;

  void setDrawFunction(DrawFunction draw) { draw_ = std::move(draw); }
  // Whether the mouse wheel scrolls the whole view when its content overflows (off for views
  // that use the wheel themselves, like the timeline's zoom).
  void setWheelScrollsView(bool scrolls) { wheel_scrolls_ = scrolls; }
  // Repaint for the next `frames` frames: hover and click state settle a frame after input.
  void requestFrames(int frames = 2);

  // CPU time of the last frame: building it (NewFrame..Render) and submitting it to OpenGL.
  double lastBuildMs() const { return build_ms_; }
  double lastRenderMs() const { return render_ms_; }
  quint64 framesDrawn() const { return frames_; }

 protected:
  void initializeGL() override;
  void paintGL() override;

  void mousePressEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void keyReleaseEvent(QKeyEvent* event) override;
  void focusOutEvent(QFocusEvent* event) override;
  void leaveEvent(QEvent* event) override;
  bool focusNextPrevChild(bool next) override;  // Tab belongs to ImGui while it has focus

 private:
  void cleanupGL();
  void makeContextCurrent();
  void setButton(int button, bool down);
  void setKey(int key, bool down);
  void updateModifiers(Qt::KeyboardModifiers modifiers);

  ImGuiContext* context_ = nullptr;
  bool backend_ready_ = false;
  DrawFunction draw_;
  bool wheel_scrolls_ = true;
  QElapsedTimer clock_;
  qint64 last_frame_ns_ = 0;
  int frames_requested_ = 0;
  quint64 frames_ = 0;
  double build_ms_ = 0, render_ms_ = 0;

  // A press and release that both arrive between two frames would be invisible to ImGui; the
  // release is held back until the frame after the press.
  std::array<bool, 5> button_down_{};
  std::array<bool, 5> button_pressed_unseen_{};
  std::array<bool, 5> button_release_held_{};
  std::array<bool, 512> key_down_{};
  std::array<bool, 512> key_pressed_unseen_{};
  std::array<bool, 512> key_release_held_{};
};

// Maps a Qt key to the index the views use in ImGuiIO::KeysDown (console/views/keys.h); -1 if
// the console has no use for it.
int imgui_key_index(int qt_key);

}  // namespace sy::console
