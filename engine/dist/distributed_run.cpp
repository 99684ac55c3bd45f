#include "engine/dist/distributed_run.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "engine/dist/device_ranks.h"
#include "engine/dist/zmq_transport.h"

namespace sy::dist {

RunIdentity run_identity(const std::filesystem::path& model_dir, const Layout& layout,
                         const std::vector<std::int32_t>& device_ranks, const std::string& command) {
  RunIdentity id;
  id.model = model_dir.filename().string();
  std::ifstream config(model_dir / "config.json", std::ios::binary);
  std::ostringstream text;
  text << config.rdbuf();
  std::string model = text.str();
  // The weights are too large to hash at every start: their names and sizes stand for them.
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(model_dir, ec))
    if (e.is_regular_file(ec) && e.path().extension() == ".safetensors")
      files.push_back(e.path().filename().string() + ":" + std::to_string(e.file_size(ec)));
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) model += "\n" + f;
  id.model_digest = digest(model);
  id.layout = layout.name;
  id.layout_text = layout.to_toml();
  std::string placed = id.layout_text;
  for (std::int32_t r : device_ranks) placed += "," + std::to_string(r);
  id.layout_digest = digest(placed);
  id.command = command;
  id.command_digest = digest(command);
  return id;
}

DistributedRun::DistributedRun(RankEnvironment env, std::vector<std::int32_t> device_ranks,
                               std::unique_ptr<ProcessLinks> links, std::unique_ptr<DeviceLinks> device_links)
    : env_(std::move(env)),
      device_ranks_(std::move(device_ranks)),
      device_links_(std::move(device_links)),
      links_(std::move(links)),
      dead_(static_cast<std::size_t>(env_.world)) {}

DistributedRun::~DistributedRun() {
  // The receiver thread posts onto the deployment's loop: it stops before either goes.
  if (links_) links_->stop();
}

StatusOr<std::unique_ptr<DistributedRun>> DistributedRun::join(const RankEnvironment& env, const Layout& layout,
                                                               const std::filesystem::path& model_dir,
                                                               const std::string& command, Topology& topology,
                                                               std::unique_ptr<DeviceLinks> device_links) {
  if (!env.distributed()) return std::unique_ptr<DistributedRun>();
  auto ranks = assign_device_ranks(layout, env.world);
  if (!ranks.ok()) return ranks.status().with_context("rank " + std::to_string(env.rank));
  LinkExchange exchange;
  if (device_links) {
    exchange.memory = device_links->memory();
    exchange.setup = [links = device_links.get()](const std::vector<std::string>& memories) {
      return links->setup(memories);
    };
  }
  auto rendezvous = bootstrap(env, run_identity(model_dir, layout, *ranks, command), exchange);
  if (!rendezvous.ok()) return rendezvous.status();
  if (device_links)
    if (const Status s = device_links->connect(env.rank, rendezvous->memories, rendezvous->link_setup); !s.ok())
      return s.with_context("rank " + std::to_string(env.rank) + ": device links between the ranks");
  topology.device_process = *ranks;
  auto links = std::make_unique<ProcessLinks>(std::move(*rendezvous), env.rank);
  return std::unique_ptr<DistributedRun>(
      new DistributedRun(env, std::move(*ranks), std::move(links), std::move(device_links)));
}

std::string DistributedRun::describe(const Topology& topology) const {
  std::string devices;
  for (std::int32_t d = 0; d < topology.num_devices; ++d)
    if (device_ranks_[static_cast<std::size_t>(d)] == env_.rank)
      devices += (devices.empty() ? "" : ", ") + topology.device_names[static_cast<std::size_t>(d)];
  return "rank " + std::to_string(env_.rank) + " of " + std::to_string(env_.world) + " (" + env_.launcher + ", pid " +
         std::to_string(::getpid()) + "): devices " + (devices.empty() ? "none" : devices);
}

void DistributedRun::configure(DeploymentOptions& options, std::int64_t bytes_per_row) {
  options.process = env_.rank;
  options.transport = ZmqTransport::factory(*links_, device_ranks_, bytes_per_row, options.link, device_links_.get());
}

void DistributedRun::attach(Deployment& deployment) {
  deployment_ = &deployment;
  auto* transport = dynamic_cast<ZmqTransport*>(&deployment.cluster().transport());
  group_.reset();
  group_ = std::make_unique<ProcessGroup>(*links_, deployment.loop(), deployment.cluster(), *transport);
  // Rank 0 watches every rank, the others watch rank 0. A rank still starting (rank 0 builds
  // its KV caches) has the bootstrap timeout to send its first heartbeat.
  // Ranks joined by device links also watch each other: a transfer with a dead peer must learn
  // of it here, within the heartbeat timeout (docs/deployment.md, "Faults").
  std::vector<std::int32_t> watched;
  for (std::int32_t r = 0; r < env_.world; ++r)
    if (r != env_.rank && (runs_coordinator() || r == 0 || (device_links_ && device_links_->linked(r))))
      watched.push_back(r);
  EventLoop& loop = deployment.loop();
  // The other ranks' devices report to rank 0's observers, on rank 0's clock.
  relay_.reset();  // the previous deployment's, gone with it
  ++runs_;
  if (runs_coordinator()) {
    receive_relayed_events(*links_, loop, deployment.observers(), runs_, deployment.cluster().topology());
  } else {
    relay_ = std::make_unique<EventRelay>(*links_, loop, group_->open(), runs_);
    deployment.observers().add(relay_.get(), nullptr);
  }
  links_->watch(std::move(watched), static_cast<std::int64_t>(env_.heartbeat_timeout_s * 1e9),
                static_cast<std::int64_t>(env_.bootstrap_timeout_s * 1e9), [this, &loop](std::int32_t rank, double ms) {
                  char why[160];
                  std::snprintf(why, sizeof why,
                                "rank %d stopped answering (no heartbeat for %.0f ms; it died or its node is unreachable)",
                                rank, ms);
                  // Here, on the network thread: a link transfer with it, on either thread, may
                  // be what keeps the loop from running lost().
                  if (device_links_ && device_links_->linked(rank))
                    device_links_->peer_fault(rank, PeerState::Lost, why);
                  // Rank 0 decides for the run; another rank only gives up its link to a peer
                  // that is not rank 0 (rank 0 watches that peer too and ends the run).
                  if (!runs_coordinator() && rank != 0) {
                    std::fprintf(stderr, "switchyard: rank %d: %s; its device links are given up\n", env_.rank, why);
                    return;
                  }
                  loop.post_external([this, rank, reason = std::string(why)] { lost(rank, reason); });
                },
                [&loop] { return loop.now(); }, runs_);
  if (runs_coordinator()) deployment.cluster().set_peers(group_.get());
  links_->start();
}

void DistributedRun::lost(std::int32_t rank, const std::string& why) {
  if (!failure_.empty()) return;
  failure_ = why;
  dead_[static_cast<std::size_t>(rank)] = why;
  std::fprintf(stderr, "switchyard: rank %d: %s\n", env_.rank, why.c_str());
  links_->forget(rank);
  if (runs_coordinator()) {
    // Its requests fail with the reason; the survivors are told to stop.
    deployment_->coordinator().fail(why);
    group_->shutdown();
    if (on_lost_) on_lost_(rank, why);
  } else {
    group_->stop();
  }
}

void DistributedRun::serve(Deployment& deployment) {
  deployment.loop().run();
  deployment.cluster().flush_stalls();
  ProcessLinks::Offset offset;
  if (links_->clock_offset(0, offset))
    std::fprintf(stderr, "rank %d: clock offset to rank 0 %+.1f us, residual error under %.1f us\n", env_.rank,
                 static_cast<double>(offset.offset_ns) / 1e3, static_cast<double>(offset.error_ns) / 1e3);
  detach();
}

nlohmann::json DistributedRun::processes() const {
  nlohmann::json out = nlohmann::json::array();
  for (std::int32_t r = 0; r < env_.world; ++r) {
    nlohmann::json devices = nlohmann::json::array();
    for (std::size_t d = 0; d < device_ranks_.size(); ++d)
      if (device_ranks_[d] == r) devices.push_back(static_cast<std::int32_t>(d));
    const std::string& why = dead_[static_cast<std::size_t>(r)];
    nlohmann::json p = {{"rank", r},
                        {"state", why.empty() ? "alive" : "dead"},
                        {"reason", why.empty() ? nlohmann::json(nullptr) : nlohmann::json(why)},
                        {"devices", std::move(devices)},
                        {"clock_offset_us", nullptr},
                        {"clock_error_us", nullptr}};
    ProcessLinks::Offset offset;
    if (r == env_.rank) {
      p["clock_offset_us"] = 0.0;
      p["clock_error_us"] = 0.0;
    } else if (links_->clock_offset(r, offset)) {
      p["clock_offset_us"] = static_cast<double>(offset.offset_ns) / 1e3;
      p["clock_error_us"] = static_cast<double>(offset.error_ns) / 1e3;
    }
    out.push_back(std::move(p));
  }
  return out;
}

void DistributedRun::leave() {
  if (group_ && group_->open()) group_->stop();
}

void DistributedRun::detach() {
  // The receiver thread posts onto the deployment's loop: it stops before the loop goes.
  if (links_) links_->stop();
}

void DistributedRun::finish() {
  if (failure_.empty()) group_->shutdown();
  detach();
  // Outgoing messages are flushed when the links close (linger): the Shutdown reaches everyone.
}

}  // namespace sy::dist
