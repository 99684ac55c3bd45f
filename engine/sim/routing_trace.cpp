#include "engine/sim/routing_trace.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace sy {
namespace {
constexpr const char* kMagic = "# switchyard routing trace v1";
}

std::size_t RoutingTrace::RecordHash::operator()(const Record& r) const {
  // splitmix64's finaliser over the fields: only the bucket depends on it, never the identity.
  auto mix = [](std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  const std::uint64_t low = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(r.position)) << 32) |
                            static_cast<std::uint32_t>(r.block);
  return static_cast<std::size_t>(mix(mix(static_cast<std::uint64_t>(r.request)) ^ low));
}

void RoutingTrace::add(std::int32_t block, std::int64_t request, std::int32_t position, const std::int32_t* ids) {
  const Record record{request, position, block};
  const auto [it, inserted] = index_.try_emplace(record, records_.size());
  if (!inserted) return;
  records_.push_back(record);
  experts_.insert(experts_.end(), ids, ids + shape_.top_k);
}

bool RoutingTrace::lookup(std::int32_t block, std::int64_t request, std::int32_t position, std::int32_t* ids) const {
  const auto it = index_.find(Record{request, position, block});
  if (it == index_.end()) return false;
  const auto* src = experts_.data() + it->second * static_cast<std::size_t>(shape_.top_k);
  std::copy(src, src + shape_.top_k, ids);
  return true;
}

Status RoutingTrace::write(const std::filesystem::path& path) const {
  std::ostringstream out;
  out << kMagic << "\n"
      << "layers " << shape_.num_layers << " experts " << shape_.num_experts << " top_k " << shape_.top_k << "\n";
  for (std::size_t i = 0; i < records_.size(); ++i) {
    const Record& r = records_[i];
    out << r.request << ' ' << r.position << ' ' << r.block;
    for (std::int32_t k = 0; k < shape_.top_k; ++k) out << ' ' << experts_[i * static_cast<std::size_t>(shape_.top_k) + static_cast<std::size_t>(k)];
    out << '\n';
  }
  const std::string text = out.str();
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::Error("cannot write routing trace " + path.string() + ": " + std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  std::error_code ec;
  if (ok && closed) std::filesystem::rename(tmp, path, ec);
  if (!ok || !closed || ec) {
    std::filesystem::remove(tmp, ec);
    return Status::Error("cannot write routing trace " + path.string());
  }
  return Status::Ok();
}

StatusOr<RoutingTrace> RoutingTrace::load(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::ifstream in(path);
  if (!in) return Status::Error("cannot open routing trace " + name + ": " + std::strerror(errno));
  return parse(in, name);
}

StatusOr<RoutingTrace> RoutingTrace::parse(std::istream& in, const std::string& name) {
  std::string line;
  if (!std::getline(in, line) || line != kMagic)
    return Status::Error(name + ": not a routing trace (first line must be '" + kMagic + "')");
  Shape shape;
  {
    std::string w1, w2, w3;
    if (!std::getline(in, line)) return Status::Error(name + ":2: missing the 'layers L experts E top_k K' line");
    std::istringstream hs(line);
    if (!(hs >> w1 >> shape.num_layers >> w2 >> shape.num_experts >> w3 >> shape.top_k) || w1 != "layers" ||
        w2 != "experts" || w3 != "top_k" || shape.num_layers <= 0 || shape.num_experts <= 0 || shape.top_k <= 0 ||
        shape.top_k > shape.num_experts || shape.num_layers > kMaxLayers || shape.num_experts > kMaxExperts)
      return Status::Error(name + ":2: expected 'layers L experts E top_k K' with 0 < L <= " +
                           std::to_string(kMaxLayers) + " and 0 < K <= E <= " + std::to_string(kMaxExperts) + ", got '" +
                           line + "'");
  }
  RoutingTrace trace(shape);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(shape.top_k));
  for (std::int64_t lineno = 3; std::getline(in, line); ++lineno) {
    if (line.empty()) continue;
    std::istringstream ls(line);
    std::int64_t request = 0;
    std::int32_t position = 0, block = 0;
    bool ok = static_cast<bool>(ls >> request >> position >> block) && request >= 0 && position >= 0 && block >= 0 &&
              block < shape.num_layers;
    for (std::int32_t k = 0; ok && k < shape.top_k; ++k)
      ok = static_cast<bool>(ls >> ids[static_cast<std::size_t>(k)]) && ids[static_cast<std::size_t>(k)] >= 0 &&
           ids[static_cast<std::size_t>(k)] < shape.num_experts;
    std::string extra;
    if (!ok || (ls >> extra))
      return Status::Error(name + ":" + std::to_string(lineno) + ": expected 'request position block' and " +
                           std::to_string(shape.top_k) + " expert ids below " + std::to_string(shape.num_experts) +
                           ", got '" + line + "'");
    trace.add(block, request, position, ids.data());
  }
  return trace;
}

}  // namespace sy
