#include "console/app/log_panel.h"

#include <QDateTime>

namespace sy::console {

LogPanel::LogPanel(QWidget* parent) : QPlainTextEdit(parent) {
  setReadOnly(true);
  setMaximumBlockCount(5000);
  setObjectName("controlLog");
  setLineWrapMode(QPlainTextEdit::WidgetWidth);
}

void LogPanel::append(Level level, const QString& text) {
  const QString time = QDateTime::currentDateTime().toString("HH:mm:ss.zzz");
  QString colour = "#c8cad0";
  if (level == Level::Ok) colour = "#7fd18b";
  if (level == Level::Error) {
    colour = "#ff6060";
    ++errors_;
  }
  appendHtml(QString("<span style='color:#80848c'>%1</span> <span style='color:%2'>%3</span>")
                 .arg(time, colour, text.toHtmlEscaped()));
}

}  // namespace sy::console
