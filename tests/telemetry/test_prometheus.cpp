#include "telemetry/prometheus_registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include "telemetry/metrics_http_server.h"
#include "telemetry/serving_metrics.h"

namespace sy::telemetry {
namespace {

TEST(Prometheus, NumbersAreWrittenAsGoWritesThem) {
  EXPECT_EQ(prometheus_number(0), "0");
  EXPECT_EQ(prometheus_number(1), "1");
  EXPECT_EQ(prometheus_number(-2.5), "-2.5");
  EXPECT_EQ(prometheus_number(0.25), "0.25");
  EXPECT_EQ(prometheus_number(0.1), "0.1");
  EXPECT_EQ(prometheus_number(999999), "999999");
  EXPECT_EQ(prometheus_number(1e6), "1e+06");
  EXPECT_EQ(prometheus_number(1234567), "1.234567e+06");
  EXPECT_EQ(prometheus_number(0.0001), "0.0001");
  EXPECT_EQ(prometheus_number(0.00001), "1e-05");
  EXPECT_EQ(prometheus_number(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(prometheus_number(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(prometheus_number(std::nan("")), "NaN");
}

TEST(Prometheus, ExpositionTextIsExact) {
  PrometheusRegistry registry;
  auto& running = registry.gauge("switchyard_requests_running", "Requests being decoded.");
  auto& tokens = registry.counter("switchyard_generated_tokens_total", "Tokens generated since start.");
  auto& stall = registry.gauge("switchyard_device_stall_fraction", "Fraction of the last window stalled,\nby reason.",
                               {"device", "reason"});
  auto& itl = registry.histogram("switchyard_itl_seconds", "Inter-token latency.", {0.005, 0.01, 0.1});
  running.get().set(3);
  tokens.get().inc(10);
  tokens.get().inc(2.5);
  tokens.get().inc(-4);  // ignored: counters only go up
  stall.with({"e0", "queue_empty"}).set(0.25);
  stall.with({"a\"0\\\n", "barrier"}).set(0.5);
  for (double v : {0.00390625, 0.0078125, 0.0078125, 0.0625, 2.0}) itl.get().observe(v);  // exact in binary

  EXPECT_EQ(registry.render(),
            "# HELP switchyard_requests_running Requests being decoded.\n"
            "# TYPE switchyard_requests_running gauge\n"
            "switchyard_requests_running 3\n"
            "# HELP switchyard_generated_tokens_total Tokens generated since start.\n"
            "# TYPE switchyard_generated_tokens_total counter\n"
            "switchyard_generated_tokens_total 12.5\n"
            "# HELP switchyard_device_stall_fraction Fraction of the last window stalled,\\nby reason.\n"
            "# TYPE switchyard_device_stall_fraction gauge\n"
            "switchyard_device_stall_fraction{device=\"a\\\"0\\\\\\n\",reason=\"barrier\"} 0.5\n"
            "switchyard_device_stall_fraction{device=\"e0\",reason=\"queue_empty\"} 0.25\n"
            "# HELP switchyard_itl_seconds Inter-token latency.\n"
            "# TYPE switchyard_itl_seconds histogram\n"
            "switchyard_itl_seconds_bucket{le=\"0.005\"} 1\n"
            "switchyard_itl_seconds_bucket{le=\"0.01\"} 3\n"
            "switchyard_itl_seconds_bucket{le=\"0.1\"} 4\n"
            "switchyard_itl_seconds_bucket{le=\"+Inf\"} 5\n"
            "switchyard_itl_seconds_sum 2.08203125\n"
            "switchyard_itl_seconds_count 5\n");
}

TEST(Prometheus, LabelledHistogramsAndSeriesRemoval) {
  PrometheusRegistry registry;
  auto& h = registry.histogram("q_depth", "Queue depth.", {1, 10}, {"device"});
  h.with({"0"}).observe(10);  // le is inclusive
  h.with({"1"}).observe(11);
  auto& g = registry.gauge("expert_imbalance", "max/mean per block.", {"block"});
  g.with({"0"}).set(1.5);
  g.with({"1"}).set(2);
  g.remove({"0"});
  EXPECT_EQ(registry.render(),
            "# HELP q_depth Queue depth.\n"
            "# TYPE q_depth histogram\n"
            "q_depth_bucket{device=\"0\",le=\"1\"} 0\n"
            "q_depth_bucket{device=\"0\",le=\"10\"} 1\n"
            "q_depth_bucket{device=\"0\",le=\"+Inf\"} 1\n"
            "q_depth_sum{device=\"0\"} 10\n"
            "q_depth_count{device=\"0\"} 1\n"
            "q_depth_bucket{device=\"1\",le=\"1\"} 0\n"
            "q_depth_bucket{device=\"1\",le=\"10\"} 0\n"
            "q_depth_bucket{device=\"1\",le=\"+Inf\"} 1\n"
            "q_depth_sum{device=\"1\"} 11\n"
            "q_depth_count{device=\"1\"} 1\n"
            "# HELP expert_imbalance max/mean per block.\n"
            "# TYPE expert_imbalance gauge\n"
            "expert_imbalance{block=\"1\"} 2\n");
}

TEST(Prometheus, RegistrationRules) {
  PrometheusRegistry registry;
  EXPECT_THROW(registry.gauge("9lives", "x"), std::invalid_argument);
  EXPECT_THROW(registry.gauge("has space", "x"), std::invalid_argument);
  EXPECT_THROW(registry.gauge("ok", "x", {"__reserved"}), std::invalid_argument);
  EXPECT_THROW(registry.histogram("h", "x", {1}, {"le"}), std::invalid_argument);
  EXPECT_THROW(registry.histogram("h", "x", {2, 1}), std::invalid_argument);
  auto& a = registry.gauge("g", "x", {"device"});
  EXPECT_EQ(&registry.gauge("g", "x", {"device"}), &a);
  EXPECT_THROW(registry.counter("g", "x", {"device"}), std::invalid_argument);
  EXPECT_THROW(registry.gauge("g", "x", {"block"}), std::invalid_argument);
  EXPECT_THROW(a.with({"0", "extra"}), std::invalid_argument);
}

TEST(Prometheus, ConcurrentUpdatesAreNotLost) {
  PrometheusRegistry registry;
  auto& c = registry.counter("c_total", "x", {"t"});
  auto& h = registry.histogram("h", "x", {0.5});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100000; ++i) {
        c.with({std::to_string(i % 2)}).inc();
        h.get().observe(t % 2 == 0 ? 0.25 : 1.0);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.with({"0"}).value() + c.with({"1"}).value(), 400000);
  const auto s = h.get().snapshot();
  EXPECT_EQ(s.count, 400000u);
  EXPECT_EQ(s.cumulative[0], 200000u);
  EXPECT_DOUBLE_EQ(s.sum, 200000 * 0.25 + 200000 * 1.0);
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.starts_with(line + "\n");
}

TEST(ServingMetrics, FollowsTheSummaryObjects) {
  PrometheusRegistry registry;
  ServingMetrics metrics(registry);
  metrics.set_device_names({"a0", "e0"});
  metrics.on_summary(nlohmann::json::parse(R"({"t_begin_ns":0,"t_end_ns":1000000000,"tokens_per_s":1662.5,
      "requests_finished":17,"running":48,"waiting":3,"kv_usage":0.375,
      "devices":[{"device":0,"busy":0.75,"stall":{"queue_empty":0.125,"barrier":0.125,"transfer":0,"weights":0}},
                 {"device":7,"busy":0.5,"stall":{"transfer":"n/a"}},{"busy":1}],
      "expert_imbalance":[1.5,2.25],"dropped_events":4,"prefix_cache":{"queries":120,"hits":48}})"));
  metrics.on_summary(nlohmann::json::parse(R"({"requests_finished":3,"running":"many","prefix_cache":{"queries":30,"hits":"x"}})"));
  metrics.on_summary(nlohmann::json::array());  // not an object: ignored
  metrics.add_generated_tokens(100);
  metrics.add_generated_tokens(28);
  metrics.observe_inter_token_latency(0.002);
  metrics.observe_time_to_first_token(0.2);
  metrics.observe_end_to_end_latency(3);
  metrics.set_queue_depth(1, 37);

  const std::string text = registry.render();
  for (const char* line : {
           "switchyard_requests_running 48", "switchyard_requests_waiting 3",
           "switchyard_generation_tokens_per_second 1662.5", "switchyard_kv_cache_usage_ratio 0.375",
           "switchyard_generation_tokens_total 128", "switchyard_requests_finished_total 20",
           "switchyard_telemetry_dropped_events 4", "switchyard_prefix_cache_queries_total 150",
           "switchyard_prefix_cache_hits_total 48",
           "switchyard_inter_token_latency_seconds_bucket{le=\"0.0025\"} 1",
           "switchyard_inter_token_latency_seconds_bucket{le=\"0.001\"} 0",
           "switchyard_time_to_first_token_seconds_count 1", "switchyard_request_latency_seconds_sum 3",
           "switchyard_queue_depth_tokens{device=\"e0\"} 37", "switchyard_device_busy_ratio{device=\"a0\"} 0.75",
           "switchyard_device_busy_ratio{device=\"7\"} 0.5",
           "switchyard_device_stall_ratio{device=\"a0\",reason=\"queue_empty\"} 0.125",
           "switchyard_device_stall_ratio{device=\"a0\",reason=\"weights\"} 0",
           "switchyard_device_host_ratio{device=\"a0\"} 0",
           "switchyard_expert_load_imbalance{block=\"1\"} 2.25"}) {
    EXPECT_TRUE(has_line(text, line)) << line << "\n" << text;
  }
  EXPECT_EQ(text.find("reason=\"transfer\"} n/a"), std::string::npos);
  EXPECT_EQ(text.find("device=\"7\",reason"), std::string::npos);
  EXPECT_EQ(text.find("switchyard_device_host_ratio{device=\"7\"}"), std::string::npos);  // a stall share unknown

  // A window of a real backend: the rest of it went to the host.
  metrics.on_summary(nlohmann::json::parse(R"({"devices":[{"device":1,"busy":0.25,"stall":{"queue_empty":0.25}}]})"));
  EXPECT_TRUE(has_line(registry.render(), "switchyard_device_host_ratio{device=\"e0\"} 0.5")) << registry.render();
}

TEST(MetricsHttpServer, ServesTheRegistryOverHttp) {
  PrometheusRegistry registry;
  auto& g = registry.gauge("switchyard_kv_usage", "KV cache pages in use.");
  int collected = 0;
  registry.on_collect([&] { g.get().set(++collected * 0.5); });
  auto server = MetricsHttpServer::start(registry, "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().message();
  ASSERT_GT((*server)->port(), 0);

  httplib::Client client("127.0.0.1", (*server)->port());
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(10, 0);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(res->body,
            "# HELP switchyard_kv_usage KV cache pages in use.\n"
            "# TYPE switchyard_kv_usage gauge\n"
            "switchyard_kv_usage 0.5\n");
  EXPECT_EQ((*server)->scrapes(), 1u);
  auto missing = client.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  // The port is taken now: a second server there fails with a message naming it.
  auto clash = MetricsHttpServer::start(registry, "127.0.0.1", (*server)->port());
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("127.0.0.1:" + std::to_string((*server)->port())), std::string::npos);
}

// Idle clients that connect and never speak hold a worker only until they time out: with
// more of them than there are workers, a scrape still gets through within a few seconds.
TEST(MetricsHttpServer, IdleConnectionsDoNotStallScrapes) {
  PrometheusRegistry registry;
  registry.gauge("switchyard_up", "Up.").get().set(1);
  auto server = MetricsHttpServer::start(registry, "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::vector<int> idle;
  for (int i = 0; i < MetricsHttpServer::kWorkers + 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>((*server)->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    idle.push_back(fd);
  }
  httplib::Client client("127.0.0.1", (*server)->port());
  client.set_connection_timeout(10, 0);
  client.set_read_timeout(10, 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto res = client.Get("/metrics");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_LT(seconds, 5.0) << "idle connections held the workers";
  for (int fd : idle) ::close(fd);
}

}  // namespace
}  // namespace sy::telemetry
