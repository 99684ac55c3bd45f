// The Connect dialog: telemetry and control endpoints, and optional CURVE key files for an
// engine that listens beyond loopback.
#pragma once

#include <QDialog>

#include "console/app/connection_settings.h"

class QCheckBox;
class QLineEdit;

namespace sy::console {

class ConnectDialog : public QDialog {
  Q_OBJECT

 public:
  explicit ConnectDialog(const ConnectionSettings& initial, QWidget* parent = nullptr);
  ConnectionSettings settings() const;

 private:
  void accept() override;  // validates (key files readable) before closing

  QLineEdit* telemetry_;
  QLineEdit* control_;
  QCheckBox* curve_;
  QLineEdit* key_dir_;
  QLineEdit* client_name_;
};

}  // namespace sy::console
