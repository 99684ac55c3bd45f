// Live control of the engine (docs/control-protocol.md): policy and its parameters, micro-batch
// count, admission pause/resume, recording, the demo workload, and the placement editor with its
// load preview, and expert rebalancing (a proposal previewed before it is applied; the periodic
// rebalancer). It only builds commands; the main window sends them and shows every reply.
#pragma once

#include <QWidget>
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "console/model/rebalance_proposal.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace sy::console {

class ConsoleModel;
class LoadPreviewWidget;

class ControlPanel : public QWidget {
  Q_OBJECT

 public:
  explicit ControlPanel(QWidget* parent = nullptr);

  void setModel(const ConsoleModel* model) { model_ = model; }
  // Re-reads the run metadata and the last load window (the main window calls it on its timer).
  void refresh();
  // The controls show only while connected to a live engine whose run metadata has arrived:
  // before that there are no engine values to show, and with a trace open nothing to control.
  void setLive(bool live);
  // The proposal on show, if any (its id is what Apply sends).
  const std::optional<RebalanceProposal>& proposal() const { return proposal_; }

 public slots:
  // Every control reply: the panel takes the replies to its own rebalance previews.
  void onControlReply(quint64 id, const QString& description, const QString& request, bool transport_ok,
                      const QString& reply);

 signals:
  void commandRequested(QString json, QString description);

 private:
  void syncFromMeta();
  void updatePolicyWidgets();
  void updatePreview();
  void applyPolicy();
  void applyMicrobatches();
  void applyPlacement();
  void applyWorkload();
  void showProposal(const nlohmann::json& reply);

  const ConsoleModel* model_ = nullptr;
  std::uint64_t seen_meta_version_ = ~0ull;
  std::uint64_t seen_run_ = 0;
  bool live_ = false;
  bool policy_edited_ = false;
  bool microbatches_edited_ = false;

  QLabel* state_label_;
  QComboBox* policy_;
  QComboBox* scheduler_;
  QSpinBox* lookahead_;
  QDoubleSpinBox* decay_;
  QSpinBox* policy_microbatches_;
  QSpinBox* expert_chunks_;  // findep's r2
  QComboBox* order_;         // findep's shared-expert order
  QPushButton* apply_policy_;
  QSpinBox* microbatches_;
  QPushButton* apply_microbatches_;
  QLabel* admission_label_;
  QPushButton* pause_;
  QPushButton* resume_;
  QLabel* recording_label_;
  QLineEdit* record_path_;
  QPushButton* record_start_;
  QPushButton* record_stop_;
  QDoubleSpinBox* rate_;
  QLineEdit* skew_;
  QPushButton* apply_workload_;
  QComboBox* placement_mode_;
  QSpinBox* block_;
  QSpinBox* expert_;
  QComboBox* from_;
  QComboBox* to_;
  LoadPreviewWidget* preview_;
  QPushButton* apply_placement_;
  QComboBox* rebalance_algorithm_;
  QPushButton* propose_rebalance_;
  QLabel* rebalance_label_;
  LoadPreviewWidget* rebalance_preview_;
  QPushButton* apply_rebalance_;
  QCheckBox* periodic_;
  QDoubleSpinBox* rebalance_interval_;
  QDoubleSpinBox* rebalance_threshold_;
  QPushButton* set_periodic_;
  QLabel* periodic_label_;
  std::optional<RebalanceProposal> proposal_;
  QWidget* live_widgets_;
};

}  // namespace sy::console
