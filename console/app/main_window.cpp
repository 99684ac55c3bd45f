#include "console/app/main_window.h"
#include "console/app/plans_panel.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QFormLayout>
#include <QPlainTextEdit>
#include <QGuiApplication>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QSpinBox>
#include <QStatusBar>
#include <QTimer>
#include <QVBoxLayout>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "console/app/connect_dialog.h"
#include "console/app/control_panel.h"
#include "console/app/live_connection.h"
#include "console/app/log_panel.h"
#include "console/app/scrubber_bar.h"
#include "console/imgui_glue/imgui_widget.h"
#include "console/model/time_format.h"
#include "console/model/run_comparison.h"
#include "console/model/trace_copy.h"
#include "console/model/trace_loader.h"
#include "telemetry/chrome_trace_export.h"

namespace sy::console {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

constexpr int kTickMs = 50;  // 20 Hz: live views stay fluid, and a 2-core machine keeps up

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent), live_(std::make_unique<LiveConnection>()) {
  setObjectName("mainWindow");
  setWindowTitle(tr("Switchyard console"));
  // A tenth of the screen left around the window, at most the screen: every view has room.
  if (const QScreen* screen = QGuiApplication::primaryScreen()) {
    const QSize avail = screen->availableGeometry().size();
    resize(std::max(std::min(1024, avail.width()), avail.width() * 9 / 10),
           std::max(std::min(700, avail.height()), avail.height() * 9 / 10));
  } else {
    resize(1280, 800);
  }
  setDockOptions(QMainWindow::AnimatedDocks | QMainWindow::AllowTabbedDocks | QMainWindow::AllowNestedDocks);

  auto* central = new QWidget;
  auto* column = new QVBoxLayout(central);
  column->setContentsMargins(0, 0, 0, 0);
  column->setSpacing(0);
  timeline_widget_ = new ImGuiWidget;
  timeline_widget_->setObjectName("timelineView");
  timeline_widget_->setWheelScrollsView(false);
  timeline_widget_->setDrawFunction([this] { timeline_view_.draw(model_, view_state_); });
  scrubber_ = new ScrubberBar;
  column->addWidget(timeline_widget_, 1);
  column->addWidget(scrubber_);
  setCentralWidget(central);
  connect(scrubber_, &ScrubberBar::cursorChanged, this, [this](std::int64_t t) {
    view_state_.cursor_ns = t;
    if (t < 0 && view_state_.live) view_state_.follow_live = true;
    repaintViews(true);
  });

  buildDocks();
  buildMenus();

  connection_label_ = new QLabel;
  connection_label_->setObjectName("connectionLabel");
  stream_label_ = new QLabel;
  reply_label_ = new QLabel;
  reply_label_->setObjectName("replyLabel");
  frame_label_ = new QLabel;
  statusBar()->addWidget(connection_label_);
  statusBar()->addWidget(stream_label_, 1);
  statusBar()->addPermanentWidget(reply_label_);
  statusBar()->addPermanentWidget(frame_label_);

  connect(live_.get(), &LiveConnection::controlReply, this, &MainWindow::onControlReply);
  timer_ = new QTimer(this);
  connect(timer_, &QTimer::timeout, this, &MainWindow::tick);
  timer_->start(kTickMs);

  default_state_ = saveState();  // the dock arrangement before any saved layout
  loadSettings();
  updateStatus();
}

MainWindow::~MainWindow() { live_->stop(); }

void MainWindow::buildDocks() {
  queue_widget_ = new ImGuiWidget;
  queue_widget_->setDrawFunction([this] { queue_view_.draw(model_, view_state_); });
  skew_widget_ = new ImGuiWidget;
  skew_widget_->setDrawFunction([this] { skew_view_.draw(model_, view_state_); });
  charts_widget_ = new ImGuiWidget;
  charts_widget_->setDrawFunction([this] { charts_view_.draw(model_, view_state_); });
  devices_widget_ = new ImGuiWidget;
  devices_widget_->setDrawFunction([this] { device_view_.draw(model_, view_state_); });
  requests_widget_ = new ImGuiWidget;
  requests_widget_->setDrawFunction([this] { request_view_.draw(model_, view_state_); });

  QDockWidget* queues = addViewDock(tr("μ-Queues"), "queuesDock", queue_widget_, Qt::BottomDockWidgetArea);
  QDockWidget* skew = addViewDock(tr("Expert load"), "skewDock", skew_widget_, Qt::BottomDockWidgetArea);
  QDockWidget* charts = addViewDock(tr("Charts"), "chartsDock", charts_widget_, Qt::BottomDockWidgetArea);
  QDockWidget* requests = addViewDock(tr("Requests"), "requestsDock", requests_widget_, Qt::BottomDockWidgetArea);
  QDockWidget* devices = addViewDock(tr("Devices"), "devicesDock", devices_widget_, Qt::BottomDockWidgetArea);
  splitDockWidget(queues, skew, Qt::Horizontal);
  splitDockWidget(skew, charts, Qt::Horizontal);
  tabifyDockWidget(charts, requests);
  tabifyDockWidget(requests, devices);
  charts->raise();

  control_panel_ = new ControlPanel;
  control_panel_->setModel(&model_);
  connect(control_panel_, &ControlPanel::commandRequested, this, &MainWindow::sendCommand);
  connect(live_.get(), &LiveConnection::controlReply, control_panel_, &ControlPanel::onControlReply);
  auto* scroll = new QScrollArea;
  scroll->setWidget(control_panel_);
  scroll->setWidgetResizable(true);
  auto* control_dock = new QDockWidget(tr("Control"));
  control_dock->setObjectName("controlDock");
  control_dock->setWidget(scroll);
  addDockWidget(Qt::RightDockWidgetArea, control_dock);

  log_ = new LogPanel;
  auto* log_dock = new QDockWidget(tr("Log"));
  log_dock->setObjectName("logDock");
  log_dock->setWidget(log_);
  addDockWidget(Qt::RightDockWidgetArea, log_dock);
  splitDockWidget(control_dock, log_dock, Qt::Vertical);

  // Plans (MegaScale-Infer search on the engine): its own requests and replies, tabbed with the log.
  auto* plans = new PlansPanel;
  plans->setObjectName("plansPanel");
  connect(plans, &PlansPanel::commandRequested, this, &MainWindow::sendCommand);
  connect(live_.get(), &LiveConnection::controlReply, plans, &PlansPanel::onControlReply);
  auto* plans_dock = new QDockWidget(tr("Plans"));
  plans_dock->setObjectName("plansDock");
  plans_dock->setWidget(plans);
  addDockWidget(Qt::RightDockWidgetArea, plans_dock);
  tabifyDockWidget(log_dock, plans_dock);
  log_dock->raise();
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  if (shown_once_) return;
  shown_once_ = true;
  // Dock sizes only take once the window is laid out; a saved layout wins.
  if (!restored_layout_) applyDefaultSizes();
}

void MainWindow::applyDefaultSizes() {
  {
    auto* queues = findChild<QDockWidget*>("queuesDock");
    auto* skew = findChild<QDockWidget*>("skewDock");
    auto* charts = findChild<QDockWidget*>("chartsDock");
    auto* control = findChild<QDockWidget*>("controlDock");
    auto* log = findChild<QDockWidget*>("logDock");
    resizeDocks({control}, {300}, Qt::Horizontal);
    resizeDocks({queues}, {height() * 2 / 5}, Qt::Vertical);
    resizeDocks({queues, skew, charts}, {width() * 3 / 10, width() * 3 / 10, width() * 4 / 10}, Qt::Horizontal);
    resizeDocks({control, log}, {height() * 3 / 5, height() / 5}, Qt::Vertical);
  }
}

QDockWidget* MainWindow::addViewDock(const QString& title, const QString& name, ImGuiWidget* widget,
                                     Qt::DockWidgetArea area) {
  auto* dock = new QDockWidget(title);
  dock->setObjectName(name);
  widget->setObjectName(name + "View");
  dock->setWidget(widget);
  addDockWidget(area, dock);
  connect(dock, &QDockWidget::visibilityChanged, widget, [widget](bool visible) {
    if (visible) widget->requestFrames();
  });
  return dock;
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* connect_action = file->addAction(tr("&Connect to engine..."), this, &MainWindow::showConnectDialog);
  connect_action->setShortcut(QKeySequence(tr("Ctrl+K")));
  file->addAction(tr("&Disconnect"), this, &MainWindow::disconnectFromEngine);
  file->addSeparator();
  QAction* open = file->addAction(tr("&Open trace..."), this, &MainWindow::showOpenDialog);
  open->setShortcut(QKeySequence::Open);
  file->addAction(tr("Export SQLite &copy..."), this, &MainWindow::exportSqlite);
  file->addAction(tr("Export Chrome/&Perfetto JSON..."), this, &MainWindow::exportChrome);
  file->addAction(tr("Co&mpare with recording..."), this, &MainWindow::showCompareDialog);
  file->addSeparator();
  QAction* shot = file->addAction(tr("Save &screenshot..."), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Save screenshot"), "switchyard-console.png", "PNG (*.png)");
    if (path.isEmpty()) return;
    const auto st = saveScreenshot(path);
    if (!st.ok()) QMessageBox::warning(this, tr("Screenshot"), q(st.message()));
  });
  shot->setShortcut(QKeySequence(tr("Ctrl+Shift+S")));
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  for (QDockWidget* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());
  view->addSeparator();
  view->addAction(tr("&Reset layout"), this, &MainWindow::resetLayout);
  view->addAction(tr("Live &retention..."), this, &MainWindow::editRetention);

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&Navigation keys"), this, &MainWindow::showNavigationHelp);
  help->addAction(tr("&About"), this, [this] {
    QMessageBox::about(this, tr("Switchyard console"),
                       tr("Switchyard operator console.\nWatches and steers a Switchyard engine through its telemetry "
                          "stream and control socket, and opens recorded traces.\nSee docs/console.md."));
  });
}

Status MainWindow::connectTo(const ConnectionSettings& settings) {
  disconnectFromEngine();
  trace_detail_ = TraceDetail{};  // waits for a read of the old recording before it closes
  trace_.reset();
  trace_path_.clear();
  model_.clear();
  model_.set_bounded(true);
  current_run_ = 0;
  control_events_seen_ = 0;
  view_state_ = ViewState{};
  view_state_.live = true;
  timeline_view_ = TimelineView{};
  auto st = live_->start(settings);
  if (!st.ok()) {
    log_->append(LogPanel::Level::Error, tr("connect failed: %1").arg(q(st.message())));
    control_panel_->setLive(false);
    updateStatus();
    return st;
  }
  last_settings_ = settings;
  log_->append(LogPanel::Level::Info, tr("connecting to %1 (control %2)%3")
                                          .arg(q(settings.telemetry_endpoint), q(settings.control_endpoint),
                                               settings.uses_curve() ? tr(" with CURVE") : QString()));
  // The state now, rather than at the next meta message.
  live_->sendCommand(R"({"cmd":"get_state"})", tr("get state"));
  control_panel_->setLive(true);
  setWindowTitle(tr("Switchyard console - live %1").arg(q(settings.telemetry_endpoint)));
  updateStatus();
  return st;
}

void MainWindow::disconnectFromEngine() {
  if (!live_->running()) return;
  live_->stop();
  control_panel_->setLive(false);
  log_->append(LogPanel::Level::Info, tr("disconnected"));
  updateStatus();
}

Status MainWindow::openTrace(const QString& path) {
  auto reader = telemetry::TraceReader::open(path.toStdString());
  if (!reader.ok()) {
    log_->append(LogPanel::Level::Error, tr("open failed: %1").arg(q(reader.status().message())));
    return reader.status();
  }
  disconnectFromEngine();
  QApplication::setOverrideCursor(Qt::WaitCursor);
  // An hour of spans does not fit in memory as records: such a recording opens by its windows,
  // and the timeline reads the spans of what it zooms into.
  const bool overview = TraceDetail::wants_overview(**reader);
  const auto st = overview ? TraceDetail::open_overview(**reader, model_) : load_trace(**reader, model_);
  trace_detail_ = TraceDetail{};
  QApplication::restoreOverrideCursor();
  if (!st.ok()) {
    log_->append(LogPanel::Level::Error, tr("reading %1 failed: %2").arg(path, q(st.message())));
    return Status::Error(path.toStdString() + ": " + st.message());
  }
  trace_ = std::move(*reader);
  trace_path_ = path;
  view_state_ = ViewState{};
  view_state_.live = false;
  view_state_.follow_live = false;
  view_state_.cursor_ns = model_.end_ns();
  timeline_view_ = TimelineView{};
  TimelineView::fit(view_state_, model_);
  control_panel_->setLive(false);
  current_run_ = model_.meta() ? model_.meta()->run_id : 0;
  control_events_seen_ = model_.control_events().size();
  log_->append(LogPanel::Level::Info,
               tr("opened %1: %2 spans%5, %3 .. %4")
                   .arg(path)
                   .arg(q(format_count(static_cast<double>(overview ? model_.overview()->spans : model_.spans().size()))))
                   .arg(q(format_time(model_.begin_ns(), 1'000'000)), q(format_time(model_.end_ns(), 1'000'000)))
                   .arg(overview ? tr(" (overview; spans are read from the file on zoom)") : QString()));
  setWindowTitle(tr("Switchyard console - trace %1").arg(QFileInfo(path).fileName()));
  QSettings().setValue("traces/lastDir", QFileInfo(path).absolutePath());
  control_panel_->refresh();
  repaintViews(true);
  updateStatus();
  return Status::Ok();
}

void MainWindow::ingestLive() {
  std::vector<telemetry::Batch> batches = live_->takeBatches();
  if (batches.empty()) return;
  for (const telemetry::Batch& b : batches) {
    if (b.header.run_id != current_run_) {
      // A new run id: the engine restarted. Live data of the old run goes; the UI stays as it is.
      if (current_run_ != 0) {
        log_->append(LogPanel::Level::Info, tr("engine restarted (run %1 -> %2): live data cleared")
                                                .arg(current_run_)
                                                .arg(b.header.run_id));
        model_.clear();
        control_events_seen_ = 0;
        view_state_.cursor_ns = -1;
        view_state_.follow_live = true;
      }
      current_run_ = b.header.run_id;
    }
    model_.ingest(b);
  }
  model_.apply_retention();
  // Control commands from any client appear in the log too (ours are logged with their reply).
  const auto& events = model_.control_events();
  if (control_events_seen_ > events.size()) control_events_seen_ = 0;
  for (std::size_t i = control_events_seen_; i < events.size(); ++i)
    log_->append(events[i].ok ? LogPanel::Level::Info : LogPanel::Level::Error,
                 tr("engine applied at %1: %2").arg(q(format_time(events[i].t_ns, 1'000'000)), q(events[i].label())));
  control_events_seen_ = events.size();
}

void MainWindow::tick() {
  ++ticks_;
  if (live_->running()) ingestLive();
  if (trace_ && model_.overview()) {
    // Off the UI thread: a zoom's spans take up to a couple of seconds to read and decode.
    auto read = trace_detail_.ensure_async(*trace_, model_, view_state_.view_t0_ns, view_state_.view_t1_ns);
    if (!read.ok()) log_->append(LogPanel::Level::Error, tr("reading spans: %1").arg(q(read.status().message())));
  }
  if (ticks_ % 4 == 0) control_panel_->refresh();
  scrubber_->sync(model_.begin_ns(), model_.end_ns(), view_state_);
  repaintViews(false);
  if (ticks_ % 5 == 0) updateStatus();
}

void MainWindow::repaintViews(bool force) {
  // Repaint when something the views show changed: data, the scrubber, the visible range.
  std::uint64_t sig = model_.version() * 1000003u;
  sig ^= static_cast<std::uint64_t>(view_state_.cursor_ns) * 7919u;
  sig ^= static_cast<std::uint64_t>(view_state_.view_t0_ns) * 104729u + static_cast<std::uint64_t>(view_state_.view_t1_ns);
  if (!force && sig == painted_signature_) return;
  painted_signature_ = sig;
  auto visible = [](ImGuiWidget* w) { return w->isVisible() && !w->visibleRegion().isEmpty(); };
  if (visible(timeline_widget_)) timeline_widget_->update();
  // The other views change with windows of a second; 5 Hz keeps them current for a quarter of
  // the drawing (which matters with a software rasteriser), unless the scrubber moved.
  if (!force && ticks_ % 4 != 0) return;
  for (ImGuiWidget* w : {queue_widget_, skew_widget_, charts_widget_, requests_widget_, devices_widget_})
    if (visible(w)) w->update();
}

void MainWindow::updateStatus() {
  using S = LiveConnection::State;
  QString dot, text;
  if (live_->running()) {
    const double age = live_->lastMessageAge();
    const QString at = q(live_->settings().telemetry_endpoint);
    switch (live_->state()) {
      case S::Connected: dot = "#40c060"; text = tr("connected to %1").arg(at); break;
      case S::Stale: dot = "#e0a020"; text = tr("stale: no message from %1 for %2 s").arg(at).arg(age, 0, 'f', 0); break;
      case S::Waiting: dot = "#e0a020"; text = tr("waiting for a first message from %1").arg(at); break;
      case S::Disconnected: dot = "#d04040"; text = tr("disconnected from %1").arg(at); break;
    }
    QString stream = age < 0 ? tr("no message yet, %1 lost messages").arg(live_->lostMessages())
                             : tr("run %1, last message %2 ago, %3 lost messages")
                                   .arg(current_run_)
                                   .arg(q(format_duration(age * 1e9)))
                                   .arg(live_->lostMessages());
    if (live_->decodeErrors() > 0) stream += tr(", %1 undecodable").arg(live_->decodeErrors());
    if (live_->backlogDropped() > 0) stream += tr(", %1 batches dropped (console behind)").arg(live_->backlogDropped());
    if (model_.bad_messages() > 0) stream += tr(", %1 bad JSON (%2)").arg(model_.bad_messages()).arg(q(model_.last_error()));
    stream += tr("; timeline holds the last %1 at full detail, the whole run (%2) in windows")
                  .arg(q(format_duration(model_.spans().end_ns() - model_.spans().begin_ns())))
                  .arg(q(format_duration(model_.end_ns() - model_.begin_ns())));
    stream_label_->setText(stream);
  } else if (trace_) {
    dot = "#5090e0";
    text = tr("trace %1").arg(QFileInfo(trace_path_).fileName());
    if (model_.overview())
      stream_label_->setText(q(model_.describe_held()));
    else
      stream_label_->setText(tr("%1 spans over %2; whole recording loaded")
                                 .arg(q(format_count(static_cast<double>(model_.spans().size()))))
                                 .arg(q(format_duration(model_.end_ns() - model_.begin_ns()))));
  } else {
    dot = "#808080";
    text = tr("not connected (File > Connect, or File > Open trace)");
    stream_label_->setText(QString());
  }
  connection_label_->setText(QString("<span style='color:%1'>&#9679;</span> %2").arg(dot, text.toHtmlEscaped()));
  connection_label_->setToolTip(text);
  frame_label_->setText(tr("timeline frame %1 ms").arg(timeline_widget_->lastBuildMs() + timeline_widget_->lastRenderMs(), 0, 'f', 1));
}

double MainWindow::timelineBuildMs() const { return timeline_widget_->lastBuildMs(); }

void MainWindow::sendCommand(const QString& json, const QString& description) {
  if (!live_->running()) {
    log_->append(LogPanel::Level::Error, tr("%1: not connected to an engine").arg(description));
    return;
  }
  log_->append(LogPanel::Level::Info, tr("-> %1  %2").arg(description, json));
  reply_label_->setText(tr("%1 ...").arg(description));
  live_->sendCommand(json, description);
}

void MainWindow::onControlReply(quint64, const QString& description, const QString& request, bool transport_ok,
                                const QString& reply) {
  if (!transport_ok) {
    log_->append(LogPanel::Level::Error, tr("%1: no reply: %2").arg(description, reply));
    reply_label_->setText(QString("<span style='color:#ff6060'>%1: no reply</span>").arg(description.toHtmlEscaped()));
    return;
  }
  const nlohmann::json j = nlohmann::json::parse(reply.toStdString(), nullptr, false);
  const bool ok = !j.is_discarded() && j.is_object() && j.value("ok", false);
  if (!ok) {
    std::string error = "malformed reply";
    if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_string()) error = j["error"].get<std::string>();
    log_->append(LogPanel::Level::Error, tr("%1 refused: %2").arg(description, q(error)));
    reply_label_->setText(QString("<span style='color:#ff6060'>%1 refused: %2</span>")
                              .arg(description.toHtmlEscaped(), q(error).toHtmlEscaped()));
    return;
  }
  // get_state carries the run metadata: take it now instead of waiting for the next meta message.
  if (request.contains("\"get_state\"") && j.contains("state") && j["state"].is_object()) {
    model_.add_meta_json(j["state"].dump());
    control_panel_->refresh();
    log_->append(LogPanel::Level::Ok, tr("%1: ok").arg(description));
  } else {
    QString shown = reply;
    if (shown.size() > 400) shown = shown.left(400) + "...";
    log_->append(LogPanel::Level::Ok, tr("%1: %2").arg(description, shown));
  }
  reply_label_->setText(QString("<span style='color:#7fd18b'>%1: ok</span>").arg(description.toHtmlEscaped()));
}

void MainWindow::showConnectDialog() {
  ConnectDialog dialog(last_settings_, this);
  if (dialog.exec() != QDialog::Accepted) return;
  const auto st = connectTo(dialog.settings());
  if (!st.ok()) QMessageBox::warning(this, tr("Connect"), q(st.message()));
}

void MainWindow::showOpenDialog() {
  const QString dir = QSettings().value("traces/lastDir").toString();
  const QString path = QFileDialog::getOpenFileName(this, tr("Open trace"), dir, tr("Switchyard traces (*.db);;All files (*)"));
  if (path.isEmpty()) return;
  const auto st = openTrace(path);
  if (!st.ok()) QMessageBox::warning(this, tr("Open trace"), q(st.message()));
}

StatusOr<QString> MainWindow::exportSource() const {
  if (trace_) return trace_path_;
  if (!model_.meta()) return Status::Error("no trace is open and no engine is connected");
  if (!model_.meta()->recording_path)
    return Status::Error("no trace is open and the engine is not recording (Control > Record)");
  const std::string& path = *model_.meta()->recording_path;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return Status::Error("the engine records to " + path + ", which is not on this machine");
  return q(path);
}

void MainWindow::exportSqlite() {
  auto source = exportSource();
  if (!source.ok()) {
    QMessageBox::warning(this, tr("Export"), q(source.status().message()));
    return;
  }
  const QString out = QFileDialog::getSaveFileName(this, tr("Export SQLite copy"), "switchyard-trace.db", "SQLite (*.db)");
  if (out.isEmpty()) return;
  const auto st = exportSqliteTo(out);
  if (!st.ok()) QMessageBox::warning(this, tr("Export"), q(st.message()));
}

StatusOr<QString> MainWindow::compareWith(const QString& path) {
  auto reader = telemetry::TraceReader::open(path.toStdString());
  if (!reader.ok()) return reader.status();
  auto b = telemetry::profile_trace(**reader, QFileInfo(path).fileName().toStdString());
  if (!b.ok()) return Status::Error(path.toStdString() + ": " + b.status().message());
  // A: the open recording as its file says (every window and queue sample), or the live run as
  // the console holds it.
  StatusOr<telemetry::RunProfile> a = Status::Error("nothing to compare with: connect to an engine or open a recording");
  if (trace_) {
    a = telemetry::profile_trace(*trace_, QFileInfo(trace_path_).fileName().toStdString());
  } else if (model_.end_ns() > model_.begin_ns()) {
    a = profile_model(model_, "live run " + std::to_string(current_run_));
  }
  if (!a.ok()) return a.status();
  return q(telemetry::format_comparison(*a, *b));
}

void MainWindow::showCompareDialog() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Compare with recording"),
                                                    QSettings().value("traces/lastDir").toString(),
                                                    tr("Switchyard traces (*.db);;All files (*)"));
  if (path.isEmpty()) return;
  QApplication::setOverrideCursor(Qt::WaitCursor);
  auto table = compareWith(path);
  QApplication::restoreOverrideCursor();
  if (!table.ok()) {
    log_->append(LogPanel::Level::Error, tr("compare: %1").arg(q(table.status().message())));
    return;
  }
  auto* dialog = new QDialog(this);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->setWindowTitle(tr("Compare: A is what the console shows, B is %1").arg(QFileInfo(path).fileName()));
  auto* layout = new QVBoxLayout(dialog);
  auto* text = new QPlainTextEdit(*table);
  text->setObjectName("compareText");
  text->setReadOnly(true);
  text->setLineWrapMode(QPlainTextEdit::NoWrap);
  text->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  layout->addWidget(text);
  dialog->resize(1100, 360);
  dialog->show();
}

void MainWindow::exportChrome() {
  auto source = exportSource();
  if (!source.ok()) {
    QMessageBox::warning(this, tr("Export"), q(source.status().message()));
    return;
  }
  const QString out = QFileDialog::getSaveFileName(this, tr("Export Chrome/Perfetto JSON"), "switchyard-trace.json", "JSON (*.json)");
  if (out.isEmpty()) return;
  const auto st = exportChromeTo(out);
  if (!st.ok()) QMessageBox::warning(this, tr("Export"), q(st.message()));
}

Status MainWindow::exportSqliteTo(const QString& out) {
  auto source = exportSource();
  if (!source.ok()) return source.status();
  QApplication::setOverrideCursor(Qt::WaitCursor);
  const auto st = copy_trace_database(source->toStdString(), out.toStdString());
  QApplication::restoreOverrideCursor();
  if (!st.ok()) {
    log_->append(LogPanel::Level::Error, tr("export failed: %1").arg(q(st.message())));
    return st;
  }
  log_->append(LogPanel::Level::Ok, tr("exported %1 to %2").arg(*source, out));
  return st;
}

Status MainWindow::exportChromeTo(const QString& out) {
  auto source = exportSource();
  if (!source.ok()) return source.status();
  QApplication::setOverrideCursor(Qt::WaitCursor);
  Status st;
  if (trace_ && *source == trace_path_) {
    st = telemetry::export_chrome_trace(*trace_, out.toStdString());
  } else {
    auto reader = telemetry::TraceReader::open(source->toStdString());
    st = reader.ok() ? telemetry::export_chrome_trace(**reader, out.toStdString()) : reader.status();
  }
  QApplication::restoreOverrideCursor();
  if (!st.ok()) {
    log_->append(LogPanel::Level::Error, tr("export failed: %1").arg(q(st.message())));
    return st;
  }
  log_->append(LogPanel::Level::Ok, tr("exported %1 as Chrome trace JSON to %2 (opens in ui.perfetto.dev)").arg(*source, out));
  return st;
}

void MainWindow::editRetention() {
  QDialog dialog(this);
  dialog.setWindowTitle(tr("Live retention"));
  auto* form = new QFormLayout(&dialog);
  auto* seconds = new QDoubleSpinBox;
  seconds->setRange(5, 3600);
  seconds->setSuffix(tr(" s of run time"));
  seconds->setValue(static_cast<double>(model_.retention().window_ns) / 1e9);
  auto* spans = new QSpinBox;
  spans->setRange(100'000, 500'000'000);
  spans->setSingleStep(10'000'000);
  spans->setValue(static_cast<int>(model_.retention().max_spans));
  form->addRow(tr("keep the last"), seconds);
  form->addRow(tr("at most spans (held compressed, about 4 bytes each on the demo)"), spans);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  form->addRow(buttons);
  connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  if (dialog.exec() != QDialog::Accepted) return;
  model_.set_retention({static_cast<std::int64_t>(seconds->value() * 1e9), static_cast<std::size_t>(spans->value())});
  QSettings().setValue("live/retentionSeconds", seconds->value());
  QSettings().setValue("live/maxSpans", spans->value());
  updateStatus();
}

void MainWindow::showNavigationHelp() {
  QMessageBox::information(
      this, tr("Navigation"),
      tr("Timeline (click it first to give it the keyboard):\n"
         "  mouse wheel            zoom around the pointer\n"
         "  drag                   pan (and scroll the rows)\n"
         "  shift + wheel          scroll the device rows\n"
         "  shift + drag           measure a time range\n"
         "  double-click           put the scrubber cursor there\n"
         "  W / S, + / -, Up/Down  zoom in / out (shift: finer)\n"
         "  A / D, Left / Right    pan (shift: finer); PageUp/PageDown a screen\n"
         "  Home or F              fit the whole run\n"
         "  End                    follow the live edge (live) / go to the end\n"
         "  C                      centre on the scrubber cursor\n"
         "Queues: click a row to add its queues to the line plot.\n"
         "The scrubber below the timeline sets the time the queue, load and chart views show; Live returns to now."));
}

void MainWindow::resetLayout() {
  restoreState(default_state_);
  for (QDockWidget* dock : findChildren<QDockWidget*>()) dock->show();
  applyDefaultSizes();
}

void MainWindow::loadSettings() {
  QSettings s;
  if (s.contains("window/geometry")) restoreGeometry(s.value("window/geometry").toByteArray());
  if (s.contains("window/state")) restored_layout_ = restoreState(s.value("window/state").toByteArray());
  last_settings_.telemetry_endpoint = s.value("connect/telemetry", q(last_settings_.telemetry_endpoint)).toString().toStdString();
  last_settings_.control_endpoint = s.value("connect/control", q(last_settings_.control_endpoint)).toString().toStdString();
  last_settings_.key_dir = s.value("connect/keyDir").toString().toStdString();
  last_settings_.client_name = s.value("connect/clientName", "client").toString().toStdString();
  Retention r = model_.retention();
  r.window_ns = static_cast<std::int64_t>(s.value("live/retentionSeconds", static_cast<double>(r.window_ns) / 1e9).toDouble() * 1e9);
  r.max_spans = static_cast<std::size_t>(s.value("live/maxSpans", static_cast<qulonglong>(r.max_spans)).toULongLong());
  model_.set_retention(r);
}

void MainWindow::saveSettings() {
  QSettings s;
  s.setValue("window/geometry", saveGeometry());
  s.setValue("window/state", saveState());
  s.setValue("connect/telemetry", q(last_settings_.telemetry_endpoint));
  s.setValue("connect/control", q(last_settings_.control_endpoint));
  s.setValue("connect/keyDir", q(last_settings_.key_dir));
  s.setValue("connect/clientName", q(last_settings_.client_name));
}

void MainWindow::closeEvent(QCloseEvent* event) {
  saveSettings();
  live_->stop();
  QMainWindow::closeEvent(event);
}

Status MainWindow::saveScreenshot(const QString& path) {
  // Render every view and the control panel with the newest data before grabbing.
  control_panel_->refresh();
  updateStatus();
  for (ImGuiWidget* w : {timeline_widget_, queue_widget_, skew_widget_, charts_widget_, requests_widget_, devices_widget_})
    w->repaint();
  const QPixmap pixmap = grab();
  if (pixmap.isNull()) return Status::Error("grabbing the window failed");
  if (!pixmap.save(path, "PNG"))
    return Status::Error("cannot write the screenshot " + path.toStdString());
  return Status::Ok();
}

}  // namespace sy::console
