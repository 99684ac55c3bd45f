#include "console/app/scrubber_bar.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>

#include "console/model/time_format.h"
#include "console/views/view_state.h"

namespace sy::console {

ScrubberBar::ScrubberBar(QWidget* parent) : QWidget(parent) {
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(6, 2, 6, 2);
  slider_ = new QSlider(Qt::Horizontal);
  slider_->setObjectName("scrubber");
  slider_->setRange(0, kSteps);
  slider_->setValue(kSteps);
  label_ = new QLabel;
  label_->setMinimumWidth(220);
  live_ = new QPushButton(tr("Live"));
  live_->setObjectName("liveButton");
  live_->setToolTip(tr("Follow the newest data (End in the timeline)"));
  row->addWidget(new QLabel(tr("time")));
  row->addWidget(slider_, 1);
  row->addWidget(label_);
  row->addWidget(live_);
  connect(slider_, &QSlider::valueChanged, this, [this](int v) {
    if (live_mode_ && v == kSteps) {
      emit cursorChanged(-1);
      return;
    }
    const auto t = begin_ns_ + static_cast<std::int64_t>(static_cast<double>(end_ns_ - begin_ns_) * v / kSteps);
    emit cursorChanged(t);
  });
  connect(live_, &QPushButton::clicked, this, [this] { emit cursorChanged(-1); });
}

void ScrubberBar::sync(std::int64_t begin_ns, std::int64_t end_ns, const ViewState& state) {
  begin_ns_ = begin_ns;
  end_ns_ = std::max(end_ns, begin_ns + 1);
  live_mode_ = state.live;
  live_->setVisible(state.live);
  live_->setEnabled(state.cursor_ns >= 0);
  const QSignalBlocker block(slider_);
  if (state.cursor_ns < 0) {
    slider_->setValue(kSteps);
    label_->setText(state.live ? tr("live, %1").arg(QString::fromStdString(format_time(end_ns, 1'000'000)))
                               : QString::fromStdString(format_time(end_ns, 1'000'000)));
  } else if (!slider_->isSliderDown()) {
    const double f = static_cast<double>(state.cursor_ns - begin_ns_) / static_cast<double>(end_ns_ - begin_ns_);
    slider_->setValue(static_cast<int>(std::clamp(f, 0.0, 1.0) * kSteps));
  }
  if (state.cursor_ns >= 0)
    label_->setText(tr("%1 of %2 .. %3")
                        .arg(QString::fromStdString(format_time(state.cursor_ns, 1'000'000)))
                        .arg(QString::fromStdString(format_time(begin_ns_, 1'000'000)))
                        .arg(QString::fromStdString(format_time(end_ns_, 1'000'000))));
}

}  // namespace sy::console
