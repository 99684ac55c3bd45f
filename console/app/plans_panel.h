// The Plans view: asks the engine for MegaScale-Infer deployment plans (`plan`), lists them with
// their predicted throughput, latency and cost, and applies a selected plan that the running
// deployment can take live (`apply_plan`); plans that need other devices say why not.
#pragma once

#include <QString>
#include <QWidget>

#include "console/model/plan_list.h"

class QDoubleSpinBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace sy::console {

class PlansPanel : public QWidget {
  Q_OBJECT

 public:
  explicit PlansPanel(QWidget* parent = nullptr);

  // Shows the plans of a successful `plan` reply; an unreadable one is reported in the status.
  void showReply(const nlohmann::json& reply);
  const PlanList& plans() const { return plans_; }

 public slots:
  // Every control reply: the panel takes those to its own `plan` requests.
  void onControlReply(quint64 id, const QString& description, const QString& request, bool transport_ok,
                      const QString& reply);
  void requestPlans();
  void applySelected();

 signals:
  void commandRequested(QString json, QString description);

 private:
  void updateApply();

  PlanList plans_;
  QSpinBox* top_;
  QDoubleSpinBox* slo_;
  QPushButton* search_;
  QLabel* status_;
  QTableWidget* table_;
  QPushButton* apply_;
};

}  // namespace sy::console
