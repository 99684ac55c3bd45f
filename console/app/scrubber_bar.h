// The scrubber: a slider over the run (a trace's whole recording, or the live history kept)
// that sets the time the queue, skew and chart views show; "Live" returns to the newest data.
#pragma once

#include <QWidget>
#include <cstdint>

class QLabel;
class QPushButton;
class QSlider;

namespace sy::console {

struct ViewState;

class ScrubberBar : public QWidget {
  Q_OBJECT

 public:
  explicit ScrubberBar(QWidget* parent = nullptr);

  // Follows the model's range and the view state's cursor; call on the UI timer.
  void sync(std::int64_t begin_ns, std::int64_t end_ns, const ViewState& state);

 signals:
  // -1: follow the newest data.
  void cursorChanged(std::int64_t cursor_ns);

 private:
  static constexpr int kSteps = 10000;
  QSlider* slider_;
  QLabel* label_;
  QPushButton* live_;
  std::int64_t begin_ns_ = 0, end_ns_ = 0;
  bool live_mode_ = true;
};

}  // namespace sy::console
