// The console's main window: the timeline in the centre, queue, skew, chart and request views and
// the control panel and log in docks, the scrubber, menus, status bar and settings. One source at
// a time: a live engine (LiveConnection) or a recorded trace (TraceReader).
#pragma once

#include <QMainWindow>
#include <QString>
#include <cstdint>
#include <memory>

#include "console/app/connection_settings.h"
#include "console/model/console_model.h"
#include "console/views/charts_view.h"
#include "console/views/device_view.h"
#include "console/views/queue_view.h"
#include "console/views/request_table_view.h"
#include "console/views/skew_view.h"
#include "console/views/timeline_view.h"
#include "console/views/view_state.h"
#include "base/status.h"
#include "console/model/trace_detail.h"
#include "telemetry/trace_reader.h"

class QDockWidget;
class QLabel;
class QTimer;

namespace sy::console {

class ControlPanel;
class ImGuiWidget;
class LiveConnection;
class LogPanel;
class ScrubberBar;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Starts watching a live engine (closing any open trace). Errors name the bad endpoint or key.
  Status connectTo(const ConnectionSettings& settings);
  void disconnectFromEngine();
  // Opens a recorded trace (disconnecting from any engine).
  Status openTrace(const QString& path);
  // Writes a PNG of the whole window.
  Status saveScreenshot(const QString& path);
  // File > Export without the dialogs: the open trace (or the live engine's recording, when its
  // file is on this machine) as an SQLite copy or as Chrome/Perfetto JSON.
  Status exportSqliteTo(const QString& out);
  Status exportChromeTo(const QString& out);
  // File > Compare with recording without the dialogs: the table of what is shown (the live
  // run or the open recording, A) against the recording at `path` (B), per device.
  StatusOr<QString> compareWith(const QString& path);

  const ConsoleModel& model() const { return model_; }
  const ViewState& viewState() const { return view_state_; }
  const TimelineView& timelineView() const { return timeline_view_; }
  LiveConnection& connection() { return *live_; }
  LogPanel* log() const { return log_; }
  // The central timeline widget's last frame time (ms of CPU to build it).
  double timelineBuildMs() const;

 protected:
  void closeEvent(QCloseEvent* event) override;
  void showEvent(QShowEvent* event) override;

 private:
  void buildMenus();
  void buildDocks();
  QDockWidget* addViewDock(const QString& title, const QString& name, ImGuiWidget* widget, Qt::DockWidgetArea area);
  void tick();
  void ingestLive();
  void updateStatus();
  void repaintViews(bool force);
  void onControlReply(quint64 id, const QString& description, const QString& request, bool transport_ok,
                      const QString& reply);
  void sendCommand(const QString& json, const QString& description);
  void showConnectDialog();
  void showOpenDialog();
  void exportSqlite();
  void exportChrome();
  void showCompareDialog();
  void editRetention();
  void showNavigationHelp();
  void resetLayout();
  void applyDefaultSizes();
  void loadSettings();
  void saveSettings();
  // The trace file an export reads: the open trace, or the live engine's recording if it is on
  // this machine. Errors say why there is none.
  StatusOr<QString> exportSource() const;

  ConsoleModel model_;
  ViewState view_state_;
  TimelineView timeline_view_;
  QueueView queue_view_;
  SkewView skew_view_;
  ChartsView charts_view_;
  DeviceView device_view_;
  RequestTableView request_view_;

  std::unique_ptr<LiveConnection> live_;
  std::unique_ptr<telemetry::TraceReader> trace_;
  QString trace_path_;
  // A large recording is open by its overview: spans of the zoomed range come from the file.
  TraceDetail trace_detail_;
  std::uint64_t current_run_ = 0;
  std::size_t control_events_seen_ = 0;
  ConnectionSettings last_settings_;

  ImGuiWidget* timeline_widget_;
  ImGuiWidget* queue_widget_;
  ImGuiWidget* skew_widget_;
  ImGuiWidget* charts_widget_;
  ImGuiWidget* devices_widget_;
  ImGuiWidget* requests_widget_;
  ControlPanel* control_panel_;
  LogPanel* log_;
  ScrubberBar* scrubber_;
  QByteArray default_state_;
  bool shown_once_ = false;
  bool restored_layout_ = false;

  QLabel* connection_label_;
  QLabel* stream_label_;
  QLabel* reply_label_;
  QLabel* frame_label_;
  QTimer* timer_;
  int ticks_ = 0;
  std::uint64_t painted_signature_ = 0;
};

}  // namespace sy::console
