// The control log: every command sent and the engine's reply (errors in red, never dropped),
// plus connection events and control commands other clients made (from the control topic).
#pragma once

#include <QPlainTextEdit>
#include <QString>

namespace sy::console {

class LogPanel : public QPlainTextEdit {
  Q_OBJECT

 public:
  enum class Level { Info, Ok, Error };
  explicit LogPanel(QWidget* parent = nullptr);
  void append(Level level, const QString& text);
  int errorCount() const { return errors_; }

 private:
  int errors_ = 0;
};

}  // namespace sy::console
