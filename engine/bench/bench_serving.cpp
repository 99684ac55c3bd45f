// The HTTP layer's cost, in the style of vLLM's benchmark_serving: one Poisson workload
// (the `bench` workload: same seed, same prompts, lengths and arrival times) served twice on
// the cpu backend on the wall clock — in-process (requests submitted to the coordinator, as
// `switchyard bench` does) and through `switchyard serve`'s HTTP API by streaming clients that
// send each request at its arrival time — and printed side by side: output tokens/s, TTFT,
// ITL and end-to-end latency percentiles, and the ratio HTTP / in-process.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/cli/backend_options.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/serve_options.h"
#include "engine/serving/http/api_server.h"
#include "engine/serving/http/request_broker.h"
#include "engine/serving/workload.h"
#include "kernels/cpu/gemm.h"

namespace sy {
namespace {

using Steady = std::chrono::steady_clock;

struct Side {
  double tokens_per_s = 0;
  std::int64_t tokens = 0;
  double span_s = 0;
  LatencyStats ttft, itl, e2e;
};

struct Args {
  std::string model;
  cli::ServeOptions serve;
  std::string workload = "short";
  double rate = 20;
  double duration = 2;
  std::uint64_t seed = 0;
  int threads = 2;
  int rounds = 3;
};

DeploymentOptions options_for(const Args& a, const Layout& layout) {
  DeploymentOptions o = a.serve.deployment_options(layout);
  o.clock = Clock::Wall;
  return o;
}

Side in_process(const Args& a, const cli::Backend& backend, const Layout& layout, const std::vector<RequestSpec>& reqs) {
  auto d = backend.deploy(Topology::from_layout(layout, backend.config()), options_for(a, layout));
  d->submit(reqs);
  const std::int64_t end = d->run();
  const MetricsReport r = d->metrics().report(0, end);
  // End-to-end per request from the metrics' view is not kept; TTFT and ITL are.
  Side s;
  s.tokens = r.tokens_generated;
  s.span_s = static_cast<double>(end) * 1e-9;
  s.tokens_per_s = r.tokens_per_s;
  s.ttft = r.ttft;
  s.itl = r.itl;
  return s;
}

Side over_http(const Args& a, const cli::Backend& backend, const Layout& layout, const std::vector<RequestSpec>& reqs) {
  DeploymentOptions o = options_for(a, layout);
  o.coordinator.keep_finished = false;
  auto d = backend.deploy(Topology::from_layout(layout, backend.config()), o);
  http::RequestBroker broker(*d);
  http::ApiServerOptions so;
  so.port = 0;
  so.workers = 1024;
  so.model = {"bench", backend.config().max_position_embeddings, backend.config().vocab_size, std::nullopt};
  auto server = cli::take(http::ApiServer::start(so, broker));
  std::atomic<bool> stop{false};
  std::thread loop_thread([&] {
    EventLoop& loop = d->loop();
    std::function<void()> tick = [&] {
      if (!stop) loop.post(loop.now() + 10'000'000, tick);
    };
    loop.post(0, tick);
    loop.run([&] { return stop.load(); });
  });

  std::mutex m;
  std::vector<double> ttft, itl, e2e;
  std::int64_t tokens = 0, failed = 0;
  Steady::time_point last_end;
  const Steady::time_point t0 = Steady::now() + std::chrono::milliseconds(50);
  std::vector<std::thread> clients;
  clients.reserve(reqs.size());
  for (const RequestSpec& r : reqs) {
    clients.emplace_back([&, r] {
      const auto send_at = t0 + std::chrono::nanoseconds(r.arrival_ns);
      std::this_thread::sleep_until(send_at);
      httplib::Client c("127.0.0.1", server->port());
      c.set_read_timeout(600, 0);
      const nlohmann::json body = {{"prompt", r.prompt}, {"max_tokens", r.max_new_tokens}, {"temperature", 0},
                                   {"ignore_eos", true}, {"stream", true}};
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = body.dump();
      req.set_header("Content-Type", "application/json");
      std::vector<Steady::time_point> arrivals;
      std::string pending;  // an event split across reads waits for its end
      req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
        const auto now = Steady::now();
        pending.append(data, n);
        // One id per event; the last event may have none (the finish came after the last token).
        constexpr std::string_view kIds = "\"token_ids\":[";
        std::size_t begin = 0;
        for (std::size_t end = pending.find("\n\n"); end != std::string::npos; end = pending.find("\n\n", begin)) {
          const std::string_view event(pending.data() + begin, end - begin);
          const std::size_t at = event.find(kIds);
          if (at != std::string_view::npos && event[at + kIds.size()] != ']') arrivals.push_back(now);
          begin = end + 2;
        }
        pending.erase(0, begin);
        return true;
      };
      const auto res = c.send(req);
      const auto end = Steady::now();
      std::lock_guard lock(m);
      if (!res || res->status != 200 || arrivals.empty()) {
        if (failed++ == 0)
          std::printf("a request failed: %s\n", !res ? httplib::to_string(res.error()).c_str()
                                                      : (std::to_string(res->status) + " " + res->body).c_str());
        return;
      }
      const auto ns = [](auto span) { return std::chrono::duration<double, std::nano>(span).count(); };
      ttft.push_back(ns(arrivals.front() - send_at));
      for (std::size_t i = 1; i < arrivals.size(); ++i) itl.push_back(ns(arrivals[i] - arrivals[i - 1]));
      e2e.push_back(ns(end - send_at));
      tokens += static_cast<std::int64_t>(arrivals.size());
      last_end = std::max(last_end, end);
    });
  }
  for (auto& t : clients) t.join();
  broker.close();
  stop = true;
  loop_thread.join();
  server.reset();
  if (failed > 0) std::printf("%lld of %zu HTTP requests failed\n", static_cast<long long>(failed), reqs.size());
  Side s;
  s.tokens = tokens;
  s.span_s = std::chrono::duration<double>(last_end - t0).count();
  s.tokens_per_s = s.span_s > 0 ? static_cast<double>(tokens) / s.span_s : 0;
  s.ttft = latency_stats(ttft);
  s.itl = latency_stats(itl);
  s.e2e = latency_stats(e2e);
  return s;
}

void print_row(const char* what, const LatencyStats& in, const LatencyStats& http) {
  std::printf("%-10s p50 %8.2f  p99 %8.2f ms   |  p50 %8.2f  p99 %8.2f ms\n", what, in.p50_ms, in.p99_ms, http.p50_ms,
              http.p99_ms);
}

int run(const Args& a) {
  kernels::set_num_threads(a.threads);
  cli::BackendOptions bo;
  bo.backend = "cpu";
  const cli::Backend backend = cli::Backend::open(bo, a.model);
  const Layout layout = a.serve.load(backend.config());
  WorkloadSpec spec;
  spec.length_class = cli::take(parse_length_class(a.workload));
  spec.rate_per_s = a.rate;
  spec.duration_s = a.duration;
  spec.seed = a.seed;
  spec.vocab_size = backend.config().vocab_size;
  const std::vector<RequestSpec> reqs = generate_workload(spec);
  std::int64_t asked = 0;
  for (const RequestSpec& r : reqs) asked += r.max_new_tokens;
  std::printf("workload %s, Poisson %.1f req/s for %.1f s: %zu requests asking %lld tokens; layout %s, cpu on the wall "
              "clock\n\n",
              a.workload.c_str(), a.rate, a.duration, reqs.size(), static_cast<long long>(asked), layout.name.c_str());
  // Rounds alternate the two ways so that a busy machine's drift hits both alike; the round
  // with the median ratio is shown.
  std::vector<std::pair<Side, Side>> runs;
  for (int i = 0; i < a.rounds; ++i) {
    Side in_round = in_process(a, backend, layout, reqs);
    Side http_round = over_http(a, backend, layout, reqs);
    std::printf("round %d: in-process %8.1f tok/s, HTTP %8.1f tok/s, ratio %.3f\n", i + 1, in_round.tokens_per_s,
                http_round.tokens_per_s, http_round.tokens_per_s / std::max(in_round.tokens_per_s, 1e-9));
    runs.emplace_back(in_round, http_round);
  }
  std::sort(runs.begin(), runs.end(), [](const auto& x, const auto& y) {
    return x.second.tokens_per_s / std::max(x.first.tokens_per_s, 1e-9) <
           y.second.tokens_per_s / std::max(y.first.tokens_per_s, 1e-9);
  });
  const auto& [in, http] = runs[runs.size() / 2];
  std::printf("\nthe median round:\n");
  std::printf("%-10s %-36s|  %s\n", "", "in-process (bench)", "HTTP streaming clients (serve)");
  std::printf("%-10s %8.1f tok/s (%lld tokens, %.2f s)      |  %8.1f tok/s (%lld tokens, %.2f s)\n", "output",
              in.tokens_per_s, static_cast<long long>(in.tokens), in.span_s, http.tokens_per_s,
              static_cast<long long>(http.tokens), http.span_s);
  print_row("TTFT", in.ttft, http.ttft);
  print_row("ITL", in.itl, http.itl);
  std::printf("%-10s %-36s|  p50 %8.2f  p99 %8.2f ms\n", "e2e", "", http.e2e.p50_ms, http.e2e.p99_ms);
  std::printf("\nHTTP / in-process output throughput: %.3f\n", in.tokens_per_s > 0 ? http.tokens_per_s / in.tokens_per_s : 0);
  return 0;
}

}  // namespace
}  // namespace sy

int main(int argc, char** argv) {
  sy::Args a;
  CLI::App app{"HTTP serving benchmark: the same Poisson workload in-process and through the HTTP API", "bench_serving"};
  app.add_option("--model", a.model, "Model directory")->required();
  a.serve.add_to(app, /*layout_required=*/false);
  app.add_option("--workload", a.workload, "Length class (short, medium, reasonable)")->capture_default_str();
  app.add_option("--rate", a.rate, "Arrivals per second")->capture_default_str();
  app.add_option("--duration", a.duration, "Seconds of arrivals")->capture_default_str();
  app.add_option("--seed", a.seed, "Workload seed")->capture_default_str();
  app.add_option("--threads", a.threads, "CPU threads for the math kernels")->capture_default_str();
  app.add_option("--rounds", a.rounds, "Rounds of both ways, alternating; the median is shown")
      ->check(CLI::Range(1, 100))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (a.serve.layout.empty()) a.serve.layout = "colocated:1";
  try {
    return sy::run(a);
  } catch (const sy::cli::CommandError& e) {
    std::fprintf(stderr, "bench_serving: error: %s\n", e.message.c_str());
    return 1;
  }
}
