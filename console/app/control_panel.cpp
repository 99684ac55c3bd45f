#include "console/app/control_panel.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "console/app/load_preview_widget.h"
#include "console/model/console_model.h"
#include "console/model/placement_preview.h"
#include "console/model/time_format.h"

namespace sy::console {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

// The engine's largest lookahead (kMaxLookahead in engine/runtime/policy_spec.h; set_policy in
// docs/control-protocol.md): restated because the console builds without the engine. A narrower
// field would show, and Apply would send, a clamped value for an engine outside it.
constexpr int kEngineMaxLookahead = 1024;

QGroupBox* group(const QString& title, QLayout* layout) {
  auto* box = new QGroupBox(title);
  box->setLayout(layout);
  return box;
}

}  // namespace

ControlPanel::ControlPanel(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(4, 4, 4, 4);
  state_label_ = new QLabel(tr("not connected"));
  state_label_->setObjectName("stateLabel");
  state_label_->setWordWrap(true);
  state_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  outer->addWidget(state_label_);

  live_widgets_ = new QWidget;
  auto* body = new QVBoxLayout(live_widgets_);
  body->setContentsMargins(0, 0, 0, 0);
  outer->addWidget(live_widgets_);

  // Policy.
  {
    auto* form = new QFormLayout;
    policy_ = new QComboBox;
    policy_->setObjectName("policyCombo");
    policy_->addItems({"async", "pingpong", "sync", "findep", "adaptive"});
    scheduler_ = new QComboBox;
    scheduler_->setObjectName("schedulerCombo");
    scheduler_->addItems({"defrag", "mtfs", "flfs", "tail"});
    lookahead_ = new QSpinBox;
    lookahead_->setObjectName("lookaheadSpin");
    lookahead_->setRange(0, kEngineMaxLookahead);
    lookahead_->setValue(3);
    decay_ = new QDoubleSpinBox;
    decay_->setObjectName("decaySpin");
    // The engine takes (0, 1]: the field's least value is the smallest it can show.
    decay_->setDecimals(3);
    decay_->setRange(0.001, 1.0);
    decay_->setSingleStep(0.05);
    decay_->setValue(0.5);
    policy_microbatches_ = new QSpinBox;
    policy_microbatches_->setObjectName("policyMicrobatchSpin");
    policy_microbatches_->setRange(1, 64);
    policy_microbatches_->setValue(2);
    expert_chunks_ = new QSpinBox;
    expert_chunks_->setObjectName("expertChunksSpin");
    expert_chunks_->setRange(1, 64);
    expert_chunks_->setValue(2);
    order_ = new QComboBox;
    order_->setObjectName("orderCombo");
    order_->addItems({"asas", "aass"});
    apply_policy_ = new QPushButton(tr("Apply policy"));
    apply_policy_->setObjectName("applyPolicyButton");
    form->addRow(tr("policy"), policy_);
    form->addRow(tr("scheduler"), scheduler_);
    form->addRow(tr("defrag lookahead"), lookahead_);
    form->addRow(tr("defrag decay"), decay_);
    form->addRow(tr("micro-batches"), policy_microbatches_);
    form->addRow(tr("findep expert chunks"), expert_chunks_);
    form->addRow(tr("findep shared-expert order"), order_);
    form->addRow(apply_policy_);
    body->addWidget(group(tr("Scheduling policy"), form));
    auto edited = [this] {
      policy_edited_ = true;
      updatePolicyWidgets();
    };
    connect(policy_, &QComboBox::currentIndexChanged, this, edited);
    connect(scheduler_, &QComboBox::currentIndexChanged, this, edited);
    connect(lookahead_, &QSpinBox::valueChanged, this, edited);
    connect(decay_, &QDoubleSpinBox::valueChanged, this, edited);
    connect(policy_microbatches_, &QSpinBox::valueChanged, this, edited);
    connect(expert_chunks_, &QSpinBox::valueChanged, this, edited);
    connect(order_, &QComboBox::currentIndexChanged, this, edited);
    connect(apply_policy_, &QPushButton::clicked, this, &ControlPanel::applyPolicy);
  }
  // Micro-batches alone.
  {
    auto* row = new QHBoxLayout;
    microbatches_ = new QSpinBox;
    microbatches_->setObjectName("microbatchSpin");
    microbatches_->setRange(1, 64);
    microbatches_->setValue(2);
    apply_microbatches_ = new QPushButton(tr("Apply"));
    apply_microbatches_->setObjectName("applyMicrobatchesButton");
    row->addWidget(new QLabel(tr("m =")));
    row->addWidget(microbatches_, 1);
    row->addWidget(apply_microbatches_);
    body->addWidget(group(tr("Micro-batches"), row));
    connect(microbatches_, &QSpinBox::valueChanged, this, [this] { microbatches_edited_ = true; });
    connect(apply_microbatches_, &QPushButton::clicked, this, &ControlPanel::applyMicrobatches);
  }
  // Admission and recording.
  {
    auto* v = new QVBoxLayout;
    admission_label_ = new QLabel;
    admission_label_->setObjectName("admissionLabel");
    auto* row = new QHBoxLayout;
    pause_ = new QPushButton(tr("Pause admission"));
    pause_->setObjectName("pauseButton");
    resume_ = new QPushButton(tr("Resume"));
    resume_->setObjectName("resumeButton");
    row->addWidget(pause_);
    row->addWidget(resume_);
    v->addWidget(admission_label_);
    v->addLayout(row);
    recording_label_ = new QLabel;
    recording_label_->setObjectName("recordingLabel");
    recording_label_->setWordWrap(true);
    record_path_ = new QLineEdit(QStringLiteral("switchyard-run.db"));
    record_path_->setObjectName("recordPathEdit");
    record_path_->setToolTip(tr("A .db file in the engine's recording directory (its --record-dir)"));
    auto* rec = new QHBoxLayout;
    record_start_ = new QPushButton(tr("Record"));
    record_start_->setObjectName("recordStartButton");
    record_stop_ = new QPushButton(tr("Stop"));
    record_stop_->setObjectName("recordStopButton");
    rec->addWidget(record_path_, 1);
    rec->addWidget(record_start_);
    rec->addWidget(record_stop_);
    v->addWidget(recording_label_);
    v->addLayout(rec);
    body->addWidget(group(tr("Admission and recording"), v));
    connect(pause_, &QPushButton::clicked, this, [this] { emit commandRequested(R"({"cmd":"pause"})", tr("pause admission")); });
    connect(resume_, &QPushButton::clicked, this, [this] { emit commandRequested(R"({"cmd":"resume"})", tr("resume admission")); });
    connect(record_start_, &QPushButton::clicked, this, [this] {
      const nlohmann::json j = {{"cmd", "record_start"}, {"path", record_path_->text().toStdString()}};
      emit commandRequested(q(j.dump()), tr("start recording to %1").arg(record_path_->text()));
    });
    connect(record_stop_, &QPushButton::clicked, this,
            [this] { emit commandRequested(R"({"cmd":"record_stop"})", tr("stop recording")); });
  }
  // Placement editor.
  {
    auto* form = new QFormLayout;
    placement_mode_ = new QComboBox;
    placement_mode_->setObjectName("placementModeCombo");
    placement_mode_->addItems({tr("move"), tr("replicate")});
    block_ = new QSpinBox;
    block_->setObjectName("placementBlockSpin");
    block_->setRange(-1, 0);
    block_->setSpecialValueText(tr("every block"));
    expert_ = new QSpinBox;
    expert_->setObjectName("placementExpertSpin");
    from_ = new QComboBox;
    from_->setObjectName("placementFromCombo");
    to_ = new QComboBox;
    to_->setObjectName("placementToCombo");
    preview_ = new LoadPreviewWidget;
    apply_placement_ = new QPushButton(tr("Apply placement change"));
    apply_placement_->setObjectName("applyPlacementButton");
    form->addRow(tr("change"), placement_mode_);
    form->addRow(tr("block"), block_);
    form->addRow(tr("expert"), expert_);
    form->addRow(tr("from device"), from_);
    form->addRow(tr("to device"), to_);
    form->addRow(preview_);
    form->addRow(apply_placement_);
    body->addWidget(group(tr("Placement editor"), form));
    auto changed = [this] { updatePreview(); };
    connect(placement_mode_, &QComboBox::currentIndexChanged, this, changed);
    connect(block_, &QSpinBox::valueChanged, this, changed);
    connect(expert_, &QSpinBox::valueChanged, this, changed);
    connect(from_, &QComboBox::currentIndexChanged, this, changed);
    connect(to_, &QComboBox::currentIndexChanged, this, changed);
    connect(apply_placement_, &QPushButton::clicked, this, &ControlPanel::applyPlacement);
  }
  // Expert rebalancing: ask for a proposal, look at its predicted per-device load, apply it.
  {
    auto* form = new QFormLayout;
    rebalance_algorithm_ = new QComboBox;
    rebalance_algorithm_->setObjectName("rebalanceAlgorithmCombo");
    rebalance_algorithm_->addItems({"greedy", "eplb"});
    rebalance_algorithm_->setToolTip(tr("greedy: MegaScale-Infer's hot-expert replicas, nothing moves; "
                                        "eplb: DeepSeek EPLB, replicate the heaviest then re-pack every device"));
    propose_rebalance_ = new QPushButton(tr("Propose"));
    propose_rebalance_->setObjectName("proposeRebalanceButton");
    auto* row = new QHBoxLayout;
    row->addWidget(rebalance_algorithm_, 1);
    row->addWidget(propose_rebalance_);
    rebalance_label_ = new QLabel(tr("no proposal yet"));
    rebalance_label_->setObjectName("rebalanceLabel");
    rebalance_label_->setWordWrap(true);
    rebalance_preview_ = new LoadPreviewWidget;
    rebalance_preview_->setObjectName("rebalancePreview");
    rebalance_preview_->setMessage(tr("propose to preview the per-device load"));
    apply_rebalance_ = new QPushButton(tr("Apply this proposal"));
    apply_rebalance_->setObjectName("applyRebalanceButton");
    apply_rebalance_->setEnabled(false);
    periodic_ = new QCheckBox(tr("periodic"));
    periodic_->setObjectName("periodicRebalanceCheck");
    rebalance_interval_ = new QDoubleSpinBox;
    rebalance_interval_->setObjectName("rebalanceIntervalSpin");
    rebalance_interval_->setRange(0.1, 3600);
    rebalance_interval_->setValue(10);
    rebalance_interval_->setSuffix(tr(" s"));
    rebalance_threshold_ = new QDoubleSpinBox;
    rebalance_threshold_->setObjectName("rebalanceThresholdSpin");
    rebalance_threshold_->setRange(1.0, 100);
    rebalance_threshold_->setSingleStep(0.05);
    rebalance_threshold_->setValue(1.2);
    rebalance_threshold_->setToolTip(tr("act when the layers' max/mean expert load per device reaches this"));
    set_periodic_ = new QPushButton(tr("Set"));
    set_periodic_->setObjectName("setPeriodicRebalanceButton");
    auto* periodic_row = new QHBoxLayout;
    periodic_row->addWidget(periodic_);
    periodic_row->addWidget(rebalance_interval_, 1);
    periodic_row->addWidget(rebalance_threshold_, 1);
    periodic_row->addWidget(set_periodic_);
    form->addRow(tr("algorithm"), row);
    form->addRow(rebalance_label_);
    form->addRow(rebalance_preview_);
    form->addRow(apply_rebalance_);
    form->addRow(tr("every / at"), periodic_row);
    periodic_label_ = new QLabel(tr("periodic rebalancing off"));
    periodic_label_->setObjectName("periodicRebalanceLabel");
    form->addRow(periodic_label_);
    body->addWidget(group(tr("Expert rebalancing"), form));
    connect(propose_rebalance_, &QPushButton::clicked, this, [this] {
      const std::string algorithm = rebalance_algorithm_->currentText().toStdString();
      emit commandRequested(q(rebalance_preview_request(algorithm)), tr("propose a %1 rebalance").arg(q(algorithm)));
    });
    connect(apply_rebalance_, &QPushButton::clicked, this, [this] {
      if (!proposal_) return;
      emit commandRequested(q(rebalance_apply_request(*proposal_)), tr("apply rebalance proposal %1").arg(proposal_->id));
      proposal_.reset();  // applied once; the engine refuses a second apply of the same id
      apply_rebalance_->setEnabled(false);
    });
    connect(set_periodic_, &QPushButton::clicked, this, [this] {
      const bool on = periodic_->isChecked();
      const std::string algorithm = rebalance_algorithm_->currentText().toStdString();
      emit commandRequested(q(set_rebalance_request(on, rebalance_interval_->value(), rebalance_threshold_->value(), algorithm)),
                            on ? tr("rebalance (%1) every %2 s at max/mean %3")
                                     .arg(q(algorithm))
                                     .arg(rebalance_interval_->value())
                                     .arg(rebalance_threshold_->value())
                               : tr("periodic rebalancing off"));
    });
  }
  // Demo workload.
  {
    auto* row = new QHBoxLayout;
    rate_ = new QDoubleSpinBox;
    rate_->setObjectName("workloadRateSpin");
    rate_->setRange(0.1, 100000);
    rate_->setValue(60);
    rate_->setSuffix(tr(" req/s"));
    skew_ = new QLineEdit("exp:0.5");
    skew_->setObjectName("workloadSkewEdit");
    apply_workload_ = new QPushButton(tr("Apply"));
    apply_workload_->setObjectName("applyWorkloadButton");
    row->addWidget(rate_, 1);
    row->addWidget(skew_, 1);
    row->addWidget(apply_workload_);
    body->addWidget(group(tr("Demo workload"), row));
    connect(apply_workload_, &QPushButton::clicked, this, &ControlPanel::applyWorkload);
  }
  body->addStretch(1);
  updatePolicyWidgets();
  setLive(false);
}

void ControlPanel::setLive(bool live) {
  live_ = live;
  seen_meta_version_ = ~0ull;  // the next refresh shows the engine's values afresh
  policy_edited_ = microbatches_edited_ = false;
  live_widgets_->setVisible(false);
  state_label_->setText(live ? tr("connected; waiting for the engine's run metadata")
                             : tr("not connected: the controls act on a running engine (File > Connect)"));
  if (live) refresh();
}

void ControlPanel::updatePolicyWidgets() {
  const QString p = policy_->currentText();
  const bool async = p == "async";
  scheduler_->setEnabled(async);
  lookahead_->setEnabled(async && scheduler_->currentText() == "defrag");
  decay_->setEnabled(async && scheduler_->currentText() == "defrag");
  policy_microbatches_->setEnabled(p == "pingpong" || p == "findep");
  expert_chunks_->setEnabled(p == "findep");
  order_->setEnabled(p == "findep");
}

void ControlPanel::applyPolicy() {
  const std::string policy = policy_->currentText().toStdString();
  nlohmann::json params = {{"scheduler", scheduler_->currentText().toStdString()},
                           {"lookahead", lookahead_->value()},
                           {"decay", decay_->value()},
                           {"microbatches", policy_microbatches_->value()},
                           {"expert_chunks", expert_chunks_->value()},
                           {"order", order_->currentText().toStdString()}};
  const nlohmann::json j = {{"cmd", "set_policy"}, {"policy", policy}, {"params", params}};
  QString what = tr("set policy %1").arg(policy_->currentText());
  if (policy == "async") what += "/" + scheduler_->currentText();
  policy_edited_ = false;  // the next metadata shows what the engine made of it
  emit commandRequested(q(j.dump()), what);
}

void ControlPanel::applyMicrobatches() {
  const nlohmann::json j = {{"cmd", "set_microbatches"}, {"m", microbatches_->value()}};
  microbatches_edited_ = false;
  emit commandRequested(q(j.dump()), tr("set micro-batches to %1").arg(microbatches_->value()));
}

void ControlPanel::applyWorkload() {
  const nlohmann::json j = {{"cmd", "set_workload"}, {"rate", rate_->value()}, {"skew", skew_->text().toStdString()}};
  emit commandRequested(q(j.dump()), tr("set workload %1 req/s, skew %2").arg(rate_->value()).arg(skew_->text()));
}

void ControlPanel::applyPlacement() {
  PlacementChange c;
  c.kind = placement_mode_->currentIndex() == 0 ? PlacementChange::Kind::Move : PlacementChange::Kind::Replicate;
  c.block = block_->value();
  c.expert = expert_->value();
  c.from = from_->currentData().toInt();
  c.to = to_->currentData().toInt();
  const QString what = c.kind == PlacementChange::Kind::Move
                           ? tr("move expert %1 (%2) from %3 to %4")
                           : tr("replicate expert %1 (%2) to %4");
  emit commandRequested(q(c.command_json()),
                        what.arg(c.expert)
                            .arg(c.block < 0 ? tr("every block") : tr("block %1").arg(c.block))
                            .arg(from_->currentText())
                            .arg(to_->currentText()));
}

void ControlPanel::onControlReply(quint64, const QString&, const QString& request, bool transport_ok,
                                  const QString& reply) {
  const nlohmann::json r = nlohmann::json::parse(request.toStdString(), nullptr, false);
  if (r.is_discarded() || !r.is_object() || r.value("cmd", "") != "rebalance" || r.value("apply", false)) return;
  if (!transport_ok) {
    rebalance_label_->setText(tr("rebalance: no reply: %1").arg(reply));
    return;
  }
  const nlohmann::json j = nlohmann::json::parse(reply.toStdString(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.value("ok", false)) {
    const std::string error = !j.is_discarded() && j.is_object() ? j.value("error", "malformed reply") : "malformed reply";
    rebalance_label_->setText(tr("rebalance refused: %1").arg(q(error)));
    return;
  }
  showProposal(j);
}

void ControlPanel::showProposal(const nlohmann::json& reply) {
  auto p = parse_rebalance_reply(reply);
  if (!p.ok()) {
    rebalance_label_->setText(q(p.status().message()));
    return;
  }
  proposal_ = std::move(p).value();
  QString text = q(proposal_->describe());
  QStringList names;
  if (model_ != nullptr && model_->meta()) {
    const RunMeta& meta = *model_->meta();
    for (std::size_t d = 0; d < proposal_->before.size(); ++d) names << q(meta.device_name(static_cast<std::int32_t>(d)));
    // The same proposal against the console's own last window, as the placement editor shows it.
    if (const LoadWindow* window = model_->loads().latest()) {
      auto mine = preview_whole_placement(meta.placement, proposal_->placement, model_->device_count(), *window);
      if (mine.ok()) {
        const auto top = [](const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); };
        text += tr("<br>on the last window here: busiest device %1 \u2192 %2 tokens")
                    .arg(top(mine->before), 0, 'f', 0)
                    .arg(top(mine->after), 0, 'f', 0);
      }
    }
  } else {
    for (std::size_t d = 0; d < proposal_->before.size(); ++d) names << tr("dev %1").arg(d);
  }
  rebalance_label_->setText(text);
  rebalance_preview_->setLoads(names, proposal_->before, proposal_->after);
  apply_rebalance_->setEnabled(proposal_->changes > 0);
}

void ControlPanel::refresh() {
  if (model_ == nullptr || !live_) return;
  syncFromMeta();
  updatePreview();
}

void ControlPanel::syncFromMeta() {
  const auto& meta = model_->meta();
  if (!meta) {
    live_widgets_->setVisible(false);
    state_label_->setText(tr("connected; waiting for the engine's run metadata"));
    return;
  }
  live_widgets_->setVisible(true);
  const bool new_run = meta->run_id != seen_run_ || seen_meta_version_ == ~0ull;
  seen_run_ = meta->run_id;
  if (model_->version() == seen_meta_version_ && !new_run) return;
  seen_meta_version_ = model_->version();

  QString text = tr("<b>%1</b> on %2 (%3, %4 devices)<br>policy <b>%5</b>")
                     .arg(q(meta->model_name.empty() ? "?" : meta->model_name))
                     .arg(q(meta->backend))
                     .arg(q(meta->hardware.empty() ? "-" : meta->hardware))
                     .arg(meta->devices.size())
                     .arg(q(meta->policy.describe()).toHtmlEscaped());
  if (meta->policy.microbatches > 0 && meta->policy.name == "async") text += tr(", m=%1").arg(meta->policy.microbatches);
  if (meta->workload)
    text += tr("<br>workload %1 req/s, skew %2").arg(meta->workload->rate).arg(q(meta->workload->skew));
  state_label_->setText(text);
  QString admission = meta->admission_paused ? tr("<span style='color:#d08020'>admission paused</span>")
                                             : tr("admission open");
  if (meta->max_batch_per_rank > 0) admission += tr(", at most %1 requests per rank").arg(meta->max_batch_per_rank);
  if (meta->max_num_batched_tokens > 0) admission += tr(", prompts in chunks of %1 rows").arg(meta->max_num_batched_tokens);
  admission_label_->setText(admission);
  recording_label_->setText(meta->recording_path ? tr("recording to %1").arg(q(*meta->recording_path)) : tr("not recording"));
  record_start_->setEnabled(!meta->recording_path);
  record_stop_->setEnabled(meta->recording_path.has_value());
  pause_->setEnabled(!meta->admission_paused);
  resume_->setEnabled(meta->admission_paused);

  // The editable widgets follow the engine unless the operator is editing them.
  if (!policy_edited_ || new_run) {
    const QSignalBlocker b1(policy_), b2(scheduler_), b3(lookahead_), b4(decay_), b5(policy_microbatches_),
        b6(expert_chunks_), b7(order_);
    // Under the adaptive policy the combo says so (Apply keeps it adaptive), not the policy it chose.
    if (int i = policy_->findText(meta->policy.adaptive ? QStringLiteral("adaptive") : q(meta->policy.name)); i >= 0)
      policy_->setCurrentIndex(i);
    if (int i = scheduler_->findText(q(meta->policy.scheduler)); i >= 0) scheduler_->setCurrentIndex(i);
    // 0 is in the engine's range: the field must show it rather than keep an older value.
    if (meta->policy.lookahead >= 0) lookahead_->setValue(meta->policy.lookahead);
    if (meta->policy.decay > 0) decay_->setValue(meta->policy.decay);
    if (meta->policy.microbatches > 0) policy_microbatches_->setValue(meta->policy.microbatches);
    if (meta->policy.expert_chunks > 0) expert_chunks_->setValue(meta->policy.expert_chunks);
    if (int i = order_->findText(q(meta->policy.order)); i >= 0) order_->setCurrentIndex(i);
    policy_edited_ = false;
    updatePolicyWidgets();
  }
  if ((!microbatches_edited_ || new_run) && meta->policy.microbatches > 0) {
    const QSignalBlocker b(microbatches_);
    microbatches_->setValue(meta->policy.microbatches);
    microbatches_edited_ = false;
  }
  if (meta->workload && new_run) {
    rate_->setValue(meta->workload->rate);
    skew_->setText(q(meta->workload->skew));
  }
  periodic_label_->setText(meta->rebalance ? tr("periodic rebalancing: %1 every %2 s at max/mean \u2265 %3")
                                                 .arg(q(meta->rebalance->algorithm))
                                                 .arg(meta->rebalance->interval_s)
                                                 .arg(meta->rebalance->threshold)
                                           : tr("periodic rebalancing off"));
  // Placement editor ranges and device lists.
  {
    const QSignalBlocker b1(block_), b2(expert_), b3(from_), b4(to_);
    block_->setRange(-1, std::max(0, meta->blocks - 1));
    expert_->setRange(0, std::max(0, meta->experts - 1));
    if (from_->count() != static_cast<int>(meta->devices.size()) || new_run) {
      const int from = from_->currentIndex(), to = to_->currentIndex();
      from_->clear();
      to_->clear();
      for (const DeviceInfo& d : meta->devices) {
        const QString label = q(d.name) + (d.rank >= 0 ? tr(" (attn)") : QString());
        from_->addItem(label, d.index);
        to_->addItem(label, d.index);
      }
      from_->setCurrentIndex(std::max(0, from));
      to_->setCurrentIndex(std::max(0, to));
    }
  }
}

void ControlPanel::updatePreview() {
  from_->setEnabled(placement_mode_->currentIndex() == 0);
  if (model_ == nullptr || !model_->meta()) {
    preview_->setMessage(tr("no run metadata yet"));
    apply_placement_->setEnabled(false);
    return;
  }
  const LoadWindow* window = model_->loads().latest();
  if (window == nullptr) {
    preview_->setMessage(tr("no expert-load window yet"));
    apply_placement_->setEnabled(true);  // the engine decides; the preview is only advice
    return;
  }
  PlacementChange c;
  c.kind = placement_mode_->currentIndex() == 0 ? PlacementChange::Kind::Move : PlacementChange::Kind::Replicate;
  c.block = block_->value();
  c.expert = expert_->value();
  c.from = from_->currentData().toInt();
  c.to = to_->currentData().toInt();
  const RunMeta& meta = *model_->meta();
  auto p = preview_placement(meta.placement, model_->device_count(), *window, c);
  if (!p.ok()) {
    preview_->setMessage(tr("error: %1").arg(q(p.status().message())));
    apply_placement_->setEnabled(true);  // still allowed: the engine's reply is authoritative
    return;
  }
  QStringList names;
  for (std::int32_t d = 0; d < model_->device_count(); ++d) names << q(meta.device_name(d));
  preview_->setLoads(names, p->before, p->after);
  apply_placement_->setEnabled(true);
}

}  // namespace sy::console
