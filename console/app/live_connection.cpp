#include "console/app/live_connection.h"

namespace sy::console {
namespace {

constexpr std::size_t kMaxQueuedRecords = 4'000'000;
constexpr auto kControlTimeout = std::chrono::milliseconds(5000);
constexpr double kStaleSeconds = 3.0;

std::size_t records_in(const telemetry::Batch& b) {
  return b.spans.size() + b.queues.size() + b.loads.size() + b.requests.size() + 1;
}

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

LiveConnection::LiveConnection(QObject* parent) : QObject(parent) {}

LiveConnection::~LiveConnection() { stop(); }

Status LiveConnection::start(const ConnectionSettings& settings) {
  stop();
  auto keys = settings.load_keys();
  if (!keys.ok()) return keys.status();
  const telemetry::CurveClientKeys* k = keys->has_value() ? &**keys : nullptr;
  // The telemetry library's errors already name the endpoint and which one it is.
  auto subscriber = telemetry::Subscriber::connect(settings.telemetry_endpoint, k);
  if (!subscriber.ok()) return subscriber.status();
  auto control = telemetry::ControlClient::connect(settings.control_endpoint, k);
  if (!control.ok()) return control.status();
  settings_ = settings;
  subscriber_ = std::move(*subscriber);
  control_ = std::move(*control);
  stopping_ = false;
  lost_ = decode_errors_ = run_id_ = backlog_dropped_ = 0;
  last_message_ns_ = 0;
  stream_thread_ = std::thread([this] { streamLoop(); });
  control_thread_ = std::thread([this] { controlLoop(); });
  return Status::Ok();
}

void LiveConnection::stop() {
  {
    // Under the lock, so that the control thread cannot miss the wake-up between testing the
    // flag and starting to wait.
    std::lock_guard lock(commands_mutex_);
    stopping_ = true;
  }
  commands_cv_.notify_all();
  // A command in flight would otherwise hold the join below (and the UI thread) for up to its
  // timeout: nobody will read its reply now.
  if (control_) control_->cancel();
  if (stream_thread_.joinable()) stream_thread_.join();
  if (control_thread_.joinable()) control_thread_.join();
  subscriber_.reset();
  control_.reset();
  {
    std::lock_guard lock(batches_mutex_);
    batches_.clear();
    queued_records_ = 0;
  }
  std::lock_guard lock(commands_mutex_);
  commands_.clear();
}

void LiveConnection::streamLoop() {
  while (!stopping_) {
    std::vector<telemetry::Batch> got = subscriber_->poll(std::chrono::milliseconds(50));
    lost_ = subscriber_->lost_messages();
    decode_errors_ = subscriber_->decode_errors();
    run_id_ = subscriber_->run_id();
    if (got.empty()) continue;
    last_message_ns_ = steady_ns();
    std::lock_guard lock(batches_mutex_);
    for (auto& b : got) {
      queued_records_ += records_in(b);
      batches_.push_back(std::move(b));
    }
    while (queued_records_ > kMaxQueuedRecords && batches_.size() > 1) {
      queued_records_ -= records_in(batches_.front());
      batches_.pop_front();
      ++backlog_dropped_;
    }
  }
}

std::vector<telemetry::Batch> LiveConnection::takeBatches() {
  std::lock_guard lock(batches_mutex_);
  std::vector<telemetry::Batch> out(std::make_move_iterator(batches_.begin()), std::make_move_iterator(batches_.end()));
  batches_.clear();
  queued_records_ = 0;
  return out;
}

quint64 LiveConnection::sendCommand(const QString& json, const QString& description) {
  std::lock_guard lock(commands_mutex_);
  const quint64 id = next_command_id_++;
  commands_.push_back({id, description, json.toStdString()});
  commands_cv_.notify_one();
  return id;
}

void LiveConnection::controlLoop() {
  while (true) {
    Command c;
    {
      std::unique_lock lock(commands_mutex_);
      commands_cv_.wait(lock, [this] { return stopping_ || !commands_.empty(); });
      if (stopping_) return;
      c = std::move(commands_.front());
      commands_.pop_front();
    }
    auto reply = control_->call(c.json, kControlTimeout);
    // Stopped meanwhile: the call was cancelled, and a reply would land on the next connection.
    if (stopping_) return;
    const QString request = QString::fromStdString(c.json);
    if (reply.ok())
      emit controlReply(c.id, c.description, request, true, QString::fromStdString(*reply));
    else
      emit controlReply(c.id, c.description, request, false, QString::fromStdString(reply.status().message()));
  }
}

LiveConnection::State LiveConnection::state() const {
  if (!stream_thread_.joinable()) return State::Disconnected;
  const double age = lastMessageAge();
  if (age < 0) return State::Waiting;
  return age > kStaleSeconds ? State::Stale : State::Connected;
}

double LiveConnection::lastMessageAge() const {
  const std::int64_t last = last_message_ns_.load();
  if (last == 0) return -1;
  return static_cast<double>(steady_ns() - last) / 1e9;
}

}  // namespace sy::console
