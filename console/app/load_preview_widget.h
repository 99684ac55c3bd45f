// Before/after bars of per-device expert load for the placement editor's preview.
#pragma once

#include <QString>
#include <QStringList>
#include <QWidget>
#include <vector>

namespace sy::console {

class LoadPreviewWidget : public QWidget {
  Q_OBJECT

 public:
  explicit LoadPreviewWidget(QWidget* parent = nullptr);

  void setLoads(const QStringList& devices, const std::vector<double>& before, const std::vector<double>& after);
  void setMessage(const QString& message);  // shown instead of bars (an error, or "no data")

  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QStringList devices_;
  std::vector<double> before_, after_;
  QString message_;
};

}  // namespace sy::console
