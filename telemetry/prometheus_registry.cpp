#include "telemetry/prometheus_registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace sy::telemetry {

void Counter::inc(double by) {
  if (!(by >= 0)) return;  // also false for NaN
  value_.fetch_add(by, std::memory_order_relaxed);
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  const auto i = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

template <class Metric>
Metric& Family<Metric>::with(const std::vector<std::string>& label_values) {
  if (label_values.size() != labels_.size()) {
    throw std::invalid_argument("metric " + name_ + " takes " + std::to_string(labels_.size()) +
                                " label values, got " + std::to_string(label_values.size()));
  }
  std::lock_guard lock(mutex_);
  auto& slot = series_[label_values];
  if (!slot) {
    if constexpr (std::is_same_v<Metric, Histogram>) {
      slot = std::make_unique<Histogram>(bounds_);
    } else {
      slot = std::make_unique<Metric>();
    }
  }
  return *slot;
}

template <class Metric>
void Family<Metric>::remove(const std::vector<std::string>& label_values) {
  std::lock_guard lock(mutex_);
  series_.erase(label_values);
}

template <class Metric>
void Family<Metric>::clear() {
  std::lock_guard lock(mutex_);
  series_.clear();
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

namespace {

bool valid_metric_name(const std::string& n) {
  if (n.empty()) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!(alpha || (i > 0 && c >= '0' && c <= '9'))) return false;
  }
  return true;
}

bool valid_label_name(const std::string& n) {
  if (n.empty() || n.starts_with("__")) return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!(alpha || (i > 0 && c >= '0' && c <= '9'))) return false;
  }
  return true;
}

std::string label_set(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      const std::string& extra_name = "", const std::string& extra_value = "") {
  if (names.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i) out += ',';
    out += names[i] + "=\"" + prometheus_label_value(values[i]) + '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name + "=\"" + extra_value + '"';
  }
  return out + '}';
}

}  // namespace

std::string prometheus_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Go's strconv.FormatFloat(v, 'g', -1, 64), which Prometheus' own clients write: the shortest
  // digits that round-trip, in exponent form when the exponent is below -4 or at least 6.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const int exp = std::stoi(sci.substr(sci.find('e') + 1));
  if (exp < -4 || exp >= 6) return sci;
  r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

std::string prometheus_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string prometheus_help(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

PrometheusRegistry::Entry& PrometheusRegistry::add(Type type, const std::string& name, const std::string& help,
                                                   std::vector<std::string>& labels, std::vector<double>& bounds) {
  if (!valid_metric_name(name)) throw std::invalid_argument("invalid Prometheus metric name '" + name + "'");
  for (const auto& l : labels) {
    if (!valid_label_name(l) || (type == Type::Histogram && l == "le")) {
      throw std::invalid_argument("invalid label name '" + l + "' for metric " + name);
    }
  }
  if (type == Type::Histogram) {
    for (std::size_t i = 0; i < bounds.size(); ++i) {
      if (std::isnan(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
        throw std::invalid_argument("histogram " + name + ": bucket bounds must ascend strictly");
      }
    }
    if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) bounds.pop_back();  // +Inf is implied
  }
  std::lock_guard lock(mutex_);
  for (auto& e : entries_) {
    const std::string& existing = e->counter ? e->counter->name_ : e->gauge ? e->gauge->name_ : e->histogram->name_;
    if (existing != name) continue;
    const auto& existing_labels = e->counter ? e->counter->labels_ : e->gauge ? e->gauge->labels_ : e->histogram->labels_;
    if (e->type != type || existing_labels != labels || (e->histogram && e->histogram->bounds_ != bounds)) {
      throw std::invalid_argument("metric " + name + " is registered already with another type, labels or buckets");
    }
    return *e;
  }
  auto entry = std::make_unique<Entry>();
  entry->type = type;
  switch (type) {
    case Type::Counter: entry->counter.reset(new Family<Counter>(name, help, labels, {})); break;
    case Type::Gauge: entry->gauge.reset(new Family<Gauge>(name, help, labels, {})); break;
    case Type::Histogram: entry->histogram.reset(new Family<Histogram>(name, help, labels, bounds)); break;
  }
  entries_.push_back(std::move(entry));
  Entry& e = *entries_.back();
  // A family without labels has exactly one series; it exists (at 0) from the start.
  if (labels.empty()) {
    if (e.counter) e.counter->get();
    if (e.gauge) e.gauge->get();
    if (e.histogram) e.histogram->get();
  }
  return e;
}

Family<Counter>& PrometheusRegistry::counter(const std::string& name, const std::string& help,
                                             std::vector<std::string> labels) {
  std::vector<double> none;
  return *add(Type::Counter, name, help, labels, none).counter;
}

Family<Gauge>& PrometheusRegistry::gauge(const std::string& name, const std::string& help,
                                         std::vector<std::string> labels) {
  std::vector<double> none;
  return *add(Type::Gauge, name, help, labels, none).gauge;
}

Family<Histogram>& PrometheusRegistry::histogram(const std::string& name, const std::string& help,
                                                 std::vector<double> bounds, std::vector<std::string> labels) {
  return *add(Type::Histogram, name, help, labels, bounds).histogram;
}

void PrometheusRegistry::on_collect(std::function<void()> hook) {
  std::lock_guard lock(mutex_);
  hooks_.push_back(std::move(hook));
}

std::string PrometheusRegistry::render() const {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard lock(mutex_);
    hooks = hooks_;
  }
  for (const auto& h : hooks) h();

  std::string out;
  std::lock_guard lock(mutex_);
  auto header = [&](const std::string& name, const std::string& help, const char* type) {
    out += "# HELP " + name + ' ' + prometheus_help(help) + '\n';
    out += "# TYPE " + name + ' ' + type + '\n';
  };
  for (const auto& e : entries_) {
    if (e->counter || e->gauge) {
      const bool is_counter = e->counter != nullptr;
      const auto render_family = [&](const auto& f) {
        header(f.name_, f.help_, is_counter ? "counter" : "gauge");
        std::lock_guard flock(f.mutex_);
        for (const auto& [values, metric] : f.series_) {
          out += f.name_ + label_set(f.labels_, values) + ' ' + prometheus_number(metric->value()) + '\n';
        }
      };
      if (is_counter) {
        render_family(*e->counter);
      } else {
        render_family(*e->gauge);
      }
      continue;
    }
    const Family<Histogram>& f = *e->histogram;
    header(f.name_, f.help_, "histogram");
    std::lock_guard flock(f.mutex_);
    for (const auto& [values, metric] : f.series_) {
      const Histogram::Snapshot s = metric->snapshot();
      for (std::size_t i = 0; i <= f.bounds_.size(); ++i) {
        const std::string le = i < f.bounds_.size() ? prometheus_number(f.bounds_[i]) : "+Inf";
        out += f.name_ + "_bucket" + label_set(f.labels_, values, "le", le) + ' ' + std::to_string(s.cumulative[i]) + '\n';
      }
      out += f.name_ + "_sum" + label_set(f.labels_, values) + ' ' + prometheus_number(s.sum) + '\n';
      out += f.name_ + "_count" + label_set(f.labels_, values) + ' ' + std::to_string(s.count) + '\n';
    }
  }
  return out;
}

}  // namespace sy::telemetry
