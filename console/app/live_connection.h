// The live link to an engine: a Subscriber polled on its own thread (batches queue up for the UI
// thread to take) and a ControlClient on another thread (one command at a time; each reply comes
// back as a queued signal). The UI thread never waits on the network.
#pragma once

#include <QObject>
#include <QString>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "console/app/connection_settings.h"
#include "telemetry/control_client.h"
#include "base/status.h"
#include "telemetry/subscriber.h"
#include "telemetry/wire.h"

namespace sy::console {

class LiveConnection : public QObject {
  Q_OBJECT

 public:
  enum class State { Disconnected, Waiting, Connected, Stale };

  explicit LiveConnection(QObject* parent = nullptr);
  ~LiveConnection() override;

  // Connects both sockets (ZeroMQ connects asynchronously: an engine that is not up yet is
  // waited for). Errors name a malformed endpoint or key file.
  Status start(const ConnectionSettings& settings);
  void stop();
  bool running() const { return stream_thread_.joinable(); }
  const ConnectionSettings& settings() const { return settings_; }

  // Batches received since the last call (bounded: if the UI falls behind, the oldest go and
  // are counted in backlog_dropped()).
  std::vector<telemetry::Batch> takeBatches();

  // Queues a command; returns its id. controlReply() reports the outcome.
  quint64 sendCommand(const QString& json, const QString& description);

  State state() const;
  // Seconds since the last message; negative before any.
  double lastMessageAge() const;
  std::uint64_t lostMessages() const { return lost_.load(); }
  std::uint64_t decodeErrors() const { return decode_errors_.load(); }
  std::uint64_t runId() const { return run_id_.load(); }
  std::uint64_t backlogDropped() const { return backlog_dropped_.load(); }

 signals:
  // transport_ok: a reply came (it may still say "ok":false); else `reply` is the transport
  // error (timeout, socket failure).
  void controlReply(quint64 id, QString description, QString request, bool transport_ok, QString reply);

 private:
  struct Command {
    quint64 id;
    QString description;
    std::string json;
  };
  void streamLoop();
  void controlLoop();

  ConnectionSettings settings_;
  std::unique_ptr<telemetry::Subscriber> subscriber_;
  std::unique_ptr<telemetry::ControlClient> control_;
  std::atomic<bool> stopping_{false};
  std::thread stream_thread_;
  std::thread control_thread_;

  mutable std::mutex batches_mutex_;
  std::deque<telemetry::Batch> batches_;
  std::size_t queued_records_ = 0;

  std::mutex commands_mutex_;
  std::condition_variable commands_cv_;
  std::deque<Command> commands_;
  quint64 next_command_id_ = 1;

  std::atomic<std::uint64_t> lost_{0};
  std::atomic<std::uint64_t> decode_errors_{0};
  std::atomic<std::uint64_t> run_id_{0};
  std::atomic<std::uint64_t> backlog_dropped_{0};
  std::atomic<std::int64_t> last_message_ns_{0};  // steady clock; 0 before any
};

}  // namespace sy::console
