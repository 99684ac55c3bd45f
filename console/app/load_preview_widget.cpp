#include "console/app/load_preview_widget.h"

#include <QPainter>
#include <algorithm>

namespace sy::console {

LoadPreviewWidget::LoadPreviewWidget(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(80);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Preferred);
}

QSize LoadPreviewWidget::sizeHint() const {
  return QSize(260, std::max(80, 16 * static_cast<int>(before_.size()) + 28));
}

void LoadPreviewWidget::setLoads(const QStringList& devices, const std::vector<double>& before,
                                 const std::vector<double>& after) {
  devices_ = devices;
  before_ = before;
  after_ = after;
  message_.clear();
  updateGeometry();
  update();
}

void LoadPreviewWidget::setMessage(const QString& message) {
  message_ = message;
  update();
}

void LoadPreviewWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  if (!message_.isEmpty() || before_.empty()) {
    p.setPen(message_.startsWith("error") ? QColor(220, 60, 60) : palette().color(QPalette::PlaceholderText));
    p.drawText(rect().adjusted(6, 4, -6, -4), Qt::TextWordWrap, message_.isEmpty() ? tr("no load data yet") : message_);
    return;
  }
  const double max_v = std::max(1.0, std::max(*std::max_element(before_.begin(), before_.end()),
                                               *std::max_element(after_.begin(), after_.end())));
  const int label_w = 48, value_w = 110;
  const int bar_w = std::max(20, width() - label_w - value_w - 8);
  const int row_h = std::max(10, std::min(18, (height() - 20) / std::max<int>(1, static_cast<int>(before_.size()))));
  p.setPen(palette().color(QPalette::Text));
  p.drawText(4, 12, tr("tokens per device in the last window: before / after"));
  for (std::size_t i = 0; i < before_.size(); ++i) {
    const int y = 18 + static_cast<int>(i) * row_h;
    p.setPen(palette().color(QPalette::Text));
    p.drawText(QRect(4, y, label_w - 6, row_h), Qt::AlignVCenter | Qt::AlignLeft,
               i < static_cast<std::size_t>(devices_.size()) ? devices_[static_cast<int>(i)] : QString::number(i));
    const int wb = static_cast<int>(before_[i] / max_v * bar_w);
    const int wa = static_cast<int>(after_[i] / max_v * bar_w);
    p.fillRect(label_w, y + 1, wb, row_h / 2 - 1, QColor(120, 130, 150));
    const bool changed = std::abs(after_[i] - before_[i]) > 0.5;
    p.fillRect(label_w, y + row_h / 2, wa, row_h / 2 - 1,
               !changed ? QColor(120, 130, 150) : after_[i] > before_[i] ? QColor(230, 120, 60) : QColor(80, 170, 100));
    p.drawText(QRect(label_w + bar_w + 4, y, value_w, row_h), Qt::AlignVCenter | Qt::AlignLeft,
               changed ? QString("%1 -> %2").arg(before_[i], 0, 'f', 0).arg(after_[i], 0, 'f', 0)
                       : QString("%1").arg(before_[i], 0, 'f', 0));
  }
}

}  // namespace sy::console
