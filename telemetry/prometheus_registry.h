// A small Prometheus metrics registry: counters, gauges and histograms with labels, updated
// from any thread and rendered in the text exposition format 0.0.4 for GET /metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sy::telemetry {

class Counter {
 public:
  // Counters only go up: a negative or NaN increment is ignored.
  void inc(double by = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double by) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // Upper bounds, ascending; +Inf is implied.
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);

  struct Snapshot {
    std::vector<std::uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    std::uint64_t count = 0;
  };
  Snapshot snapshot() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // per bound, then +Inf (not cumulative)
  std::atomic<double> sum_{0.0};
};

// All series of one metric name, one per combination of label values.
template <class Metric>
class Family {
 public:
  // The series for these label values (as many as the family has label names), created on
  // first use. The reference stays valid until remove()/clear() drops that series.
  Metric& with(const std::vector<std::string>& label_values);
  // The series of a family without labels.
  Metric& get() { return with({}); }
  void remove(const std::vector<std::string>& label_values);
  void clear();

  const std::string& name() const { return name_; }

 private:
  friend class PrometheusRegistry;
  Family(std::string name, std::string help, std::vector<std::string> labels, std::vector<double> bounds)
      : name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)), bounds_(std::move(bounds)) {}
  std::string name_, help_;
  std::vector<std::string> labels_;
  std::vector<double> bounds_;  // histograms only
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> series_;
};

class PrometheusRegistry {
 public:
  // Register a metric family. Names follow Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*, labels
  // [a-zA-Z_][a-zA-Z0-9_]* not starting "__", no "le" on histograms); a bad name, or a name
  // registered before as another type or with other labels, is a programming error and throws
  // std::invalid_argument. Registering the same metric again returns the existing family.
  Family<Counter>& counter(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  Family<Gauge>& gauge(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  Family<Histogram>& histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                               std::vector<std::string> labels = {});

  // Called (on the scraping thread) before every render, for values cheaper to read on demand.
  void on_collect(std::function<void()> hook);

  // The text exposition format 0.0.4: families in registration order, series by label values.
  std::string render() const;

  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  enum class Type { Counter, Gauge, Histogram };
  struct Entry {
    Type type;
    std::unique_ptr<Family<Counter>> counter;
    std::unique_ptr<Family<Gauge>> gauge;
    std::unique_ptr<Family<Histogram>> histogram;
  };
  Entry& add(Type type, const std::string& name, const std::string& help, std::vector<std::string>& labels,
             std::vector<double>& bounds);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::function<void()>> hooks_;
};

// Text formatting used by render(), exposed for tests and other exporters.
std::string prometheus_number(double v);          // Go's strconv forms: 1, 0.25, 1e+06, +Inf, -Inf, NaN
std::string prometheus_label_value(std::string_view v);  // escapes \, " and newline
std::string prometheus_help(std::string_view v);         // escapes \ and newline

}  // namespace sy::telemetry
