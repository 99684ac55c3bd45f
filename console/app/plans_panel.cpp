#include "console/app/plans_panel.h"

#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

namespace sy::console {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

QTableWidgetItem* cell(const QString& text, bool number) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
  if (number) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

}  // namespace

PlansPanel::PlansPanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("Top")));
  top_ = new QSpinBox;
  top_->setObjectName("plansTop");
  top_->setRange(1, 100);
  top_->setValue(5);
  bar->addWidget(top_);
  bar->addWidget(new QLabel(tr("SLO ms/token")));
  slo_ = new QDoubleSpinBox;
  slo_->setObjectName("plansSlo");
  slo_->setRange(0, 100000);
  slo_->setDecimals(1);
  slo_->setSpecialValueText(tr("none"));
  bar->addWidget(slo_);
  search_ = new QPushButton(tr("Search plans"));
  search_->setObjectName("plansSearch");
  bar->addWidget(search_);
  bar->addStretch();
  layout->addLayout(bar);

  status_ = new QLabel(tr("No plans yet: search asks the engine for plans for its model and hardware."));
  status_->setObjectName("plansStatus");
  status_->setWordWrap(true);
  layout->addWidget(status_);

  table_ = new QTableWidget(0, 11);
  table_->setObjectName("plansTable");
  table_->setHorizontalHeaderLabels({tr("live"), tr("attention"), tr("experts"), tr("m"), tr("b_a"), tr("batch"),
                                     tr("GPUs"), tr("tokens/s"), tr("ms/token"), tr("tok/s/$"), tr("binding")});
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  layout->addWidget(table_, 1);

  apply_ = new QPushButton(tr("Apply selected plan"));
  apply_->setObjectName("plansApply");
  apply_->setEnabled(false);
  layout->addWidget(apply_);

  connect(search_, &QPushButton::clicked, this, &PlansPanel::requestPlans);
  connect(apply_, &QPushButton::clicked, this, &PlansPanel::applySelected);
  connect(table_, &QTableWidget::itemSelectionChanged, this, &PlansPanel::updateApply);
}

void PlansPanel::requestPlans() {
  emit commandRequested(q(plan_request(top_->value(), slo_->value())), tr("plan"));
}

void PlansPanel::onControlReply(quint64, const QString&, const QString& request, bool transport_ok,
                                const QString& reply) {
  const nlohmann::json r = nlohmann::json::parse(request.toStdString(), nullptr, false);
  if (r.is_discarded() || !r.is_object() || r.value("cmd", "") != "plan") return;
  if (!transport_ok) {
    status_->setText(tr("plan: no reply: %1").arg(reply));
    return;
  }
  const nlohmann::json j = nlohmann::json::parse(reply.toStdString(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.value("ok", false)) {
    const std::string error = !j.is_discarded() && j.is_object() ? j.value("error", "malformed reply") : "malformed reply";
    status_->setText(tr("plan refused: %1").arg(q(error)));
    return;
  }
  showReply(j);
}

void PlansPanel::showReply(const nlohmann::json& reply) {
  auto list = parse_plan_reply(reply);
  if (!list.ok()) {
    status_->setText(q(list.status().message()));
    return;
  }
  plans_ = std::move(list).value();
  status_->setText(tr("%1 on %2. Running: %3.").arg(q(plans_.model), q(plans_.hardware), q(plans_.current)));
  table_->setRowCount(static_cast<int>(plans_.rows.size()));
  for (int i = 0; i < static_cast<int>(plans_.rows.size()); ++i) {
    const PlanRow& p = plans_.rows[static_cast<std::size_t>(i)];
    const QString tip = p.applicable ? tr("can be applied live: ping-pong m and batch per rank")
                                     : tr("not live: %1").arg(q(p.refused));
    QTableWidgetItem* items[] = {
        cell(p.applicable ? tr("yes") : tr("no"), false),
        cell(q(p.attention), false),
        cell(q(p.experts), false),
        cell(QString::number(p.m), true),
        cell(QString::number(p.b_a), true),
        cell(QString::number(p.batch), true),
        cell(QString::number(p.devices), true),
        cell(QString::number(p.tokens_per_s, 'f', 0), true),
        cell(QString::number(p.ms_per_token, 'f', 2), true),
        cell(QString::number(p.tokens_per_s_per_price, 'f', 0), true),
        cell(q(p.binding), false)};
    for (int c = 0; c < 11; ++c) {
      items[c]->setToolTip(tip);
      if (!p.applicable) items[c]->setForeground(palette().color(QPalette::Disabled, QPalette::Text));
      table_->setItem(i, c, items[c]);
    }
  }
  table_->resizeColumnsToContents();
  updateApply();
}

void PlansPanel::updateApply() {
  const int row = table_->currentRow();
  const bool selected = !table_->selectedItems().isEmpty() && row >= 0 && row < static_cast<int>(plans_.rows.size());
  const bool ok = selected && plans_.rows[static_cast<std::size_t>(row)].applicable;
  apply_->setEnabled(ok);
  apply_->setToolTip(!selected ? tr("select a plan")
                     : ok      ? tr("switch to ping-pong with this m and batch at the next safe point")
                               : tr("not live: %1").arg(q(plans_.rows[static_cast<std::size_t>(row)].refused)));
}

void PlansPanel::applySelected() {
  const int row = table_->currentRow();
  if (row < 0 || row >= static_cast<int>(plans_.rows.size())) return;
  const PlanRow& p = plans_.rows[static_cast<std::size_t>(row)];
  if (!p.applicable) return;
  emit commandRequested(q(apply_plan_request(p)),
                        tr("apply plan %1 + %2, m=%3, b_a=%4").arg(q(p.attention), q(p.experts)).arg(p.m).arg(p.b_a));
}

}  // namespace sy::console
