#include "console/app/connect_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QVBoxLayout>

namespace sy::console {
namespace {

QWidget* with_browse(QLineEdit* edit, QWidget* parent, const QString& title) {
  // A directory chooser: key material comes as the directory `switchyard keys` writes.
  auto* w = new QWidget;
  auto* row = new QHBoxLayout(w);
  row->setContentsMargins(0, 0, 0, 0);
  auto* browse = new QPushButton(QObject::tr("Browse..."));
  row->addWidget(edit, 1);
  row->addWidget(browse);
  QObject::connect(browse, &QPushButton::clicked, parent, [edit, parent, title] {
    const QString path = QFileDialog::getExistingDirectory(parent, title, edit->text());
    if (!path.isEmpty()) edit->setText(path);
  });
  return w;
}

}  // namespace

ConnectDialog::ConnectDialog(const ConnectionSettings& initial, QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Connect to an engine"));
  auto* layout = new QVBoxLayout(this);
  auto* form = new QFormLayout;
  telemetry_ = new QLineEdit(QString::fromStdString(initial.telemetry_endpoint));
  telemetry_->setObjectName("telemetryEndpointEdit");
  control_ = new QLineEdit(QString::fromStdString(initial.control_endpoint));
  control_->setObjectName("controlEndpointEdit");
  curve_ = new QCheckBox(tr("CURVE encryption and authentication"));
  key_dir_ = new QLineEdit(QString::fromStdString(initial.key_dir));
  key_dir_->setObjectName("keyDirEdit");
  client_name_ = new QLineEdit(QString::fromStdString(initial.client_name));
  curve_->setChecked(initial.uses_curve());
  form->addRow(tr("Telemetry (SUB)"), telemetry_);
  form->addRow(tr("Control"), control_);
  form->addRow(curve_);
  form->addRow(tr("Key directory"), with_browse(key_dir_, this, tr("Key directory from switchyard keys")));
  form->addRow(tr("Client name"), client_name_);
  layout->addLayout(form);
  auto* hint = new QLabel(tr("Endpoints are ZeroMQ addresses, e.g. tcp://gpu-node-7:5555. An engine bound beyond "
                             "loopback needs CURVE: a directory written by <tt>switchyard keys</tt> holding "
                             "<tt>server.pub</tt> and <tt>NAME.key</tt> for the client name."));
  hint->setWordWrap(true);
  layout->addWidget(hint);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons->button(QDialogButtonBox::Ok)->setText(tr("Connect"));
  layout->addWidget(buttons);
  connect(buttons, &QDialogButtonBox::accepted, this, &ConnectDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &ConnectDialog::reject);
  auto toggle = [this](bool on) {
    key_dir_->parentWidget()->setEnabled(on);
    client_name_->setEnabled(on);
  };
  connect(curve_, &QCheckBox::toggled, this, toggle);
  toggle(curve_->isChecked());
}

ConnectionSettings ConnectDialog::settings() const {
  ConnectionSettings s;
  s.telemetry_endpoint = telemetry_->text().trimmed().toStdString();
  s.control_endpoint = control_->text().trimmed().toStdString();
  if (curve_->isChecked()) {
    s.key_dir = key_dir_->text().trimmed().toStdString();
    s.client_name = client_name_->text().trimmed().toStdString();
  }
  return s;
}

void ConnectDialog::accept() {
  const ConnectionSettings s = settings();
  if (s.telemetry_endpoint.empty() || s.control_endpoint.empty()) {
    QMessageBox::warning(this, windowTitle(), tr("Both endpoints are needed."));
    return;
  }
  if (curve_->isChecked()) {
    if (!s.uses_curve()) {
      QMessageBox::warning(this, windowTitle(), tr("CURVE needs the key directory written by switchyard keys."));
      return;
    }
    auto keys = s.load_keys();
    if (!keys.ok()) {
      QMessageBox::warning(this, windowTitle(), QString::fromStdString(keys.status().message()));
      return;
    }
  }
  QDialog::accept();
}

}  // namespace sy::console
