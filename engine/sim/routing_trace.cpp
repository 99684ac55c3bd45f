#include "engine/sim/routing_trace.h"

#include <unistd.h>

#include <charconv>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>

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

namespace {

// A whole word as an integer in [0, max], or false (sign, junk after the digits, overflow).
bool parse_index(const std::string& word, std::int64_t max, std::int64_t* out) {
  std::int64_t v = 0;
  const char* end = word.data() + word.size();
  const auto [ptr, ec] = std::from_chars(word.data(), end, v);
  if (ec != std::errc() || ptr != end || v < 0 || v > max) return false;
  *out = v;
  return true;
}

}  // namespace

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
    // A header with more words was written by something else (another version, another tool):
    // reading the part we know would replay a shape it does not describe.
    if (std::string extra; hs >> extra)
      return Status::Error(name + ":2: unexpected '" + extra + "' after 'layers " + std::to_string(shape.num_layers) +
                           " experts " + std::to_string(shape.num_experts) + " top_k " + std::to_string(shape.top_k) +
                           "'");
  }
  RoutingTrace trace(shape);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(shape.top_k));
  // The line that last named each expert: a repeat within one record is found in O(top_k).
  std::vector<std::int64_t> named_on(static_cast<std::size_t>(shape.num_experts), 0);
  std::vector<std::string> words;
  for (std::int64_t lineno = 3; std::getline(in, line); ++lineno) {
    if (line.empty()) continue;
    const std::string at = name + ":" + std::to_string(lineno) + ": ";
    words.clear();
    std::istringstream ls(line);
    for (std::string w; words.size() <= static_cast<std::size_t>(shape.top_k) + 3 && ls >> w;)
      words.push_back(std::move(w));
    if (words.size() != static_cast<std::size_t>(shape.top_k) + 3)
      return Status::Error(at + "expected 'request position block' and " + std::to_string(shape.top_k) +
                           " expert ids, got '" + line + "'");
    std::int64_t request = 0, position = 0, block = 0;
    if (!parse_index(words[0], std::numeric_limits<std::int64_t>::max(), &request))
      return Status::Error(at + "request '" + words[0] + "' is not an integer in [0, 2^63), in '" + line + "'");
    if (!parse_index(words[1], std::numeric_limits<std::int32_t>::max(), &position))
      return Status::Error(at + "position '" + words[1] + "' is not an integer in [0, 2^31), in '" + line + "'");
    if (!parse_index(words[2], std::numeric_limits<std::int64_t>::max(), &block) || block >= shape.num_layers)
      return Status::Error(at + "block '" + words[2] + "' is not below layers " + std::to_string(shape.num_layers) +
                           ", in '" + line + "'");
    for (std::int32_t k = 0; k < shape.top_k; ++k) {
      const std::string& w = words[static_cast<std::size_t>(k) + 3];
      std::int64_t id = 0;
      if (!parse_index(w, std::numeric_limits<std::int64_t>::max(), &id) || id >= shape.num_experts)
        return Status::Error(at + "expert id '" + w + "' is not below experts " + std::to_string(shape.num_experts) +
                             ", in '" + line + "'");
      // A router picks top_k distinct experts; a record naming one twice was not written by one.
      std::int64_t& seen = named_on[static_cast<std::size_t>(id)];
      if (seen == lineno)
        return Status::Error(at + "expert " + w + " is named twice; a token's top_k experts are distinct, in '" +
                             line + "'");
      seen = lineno;
      ids[static_cast<std::size_t>(k)] = static_cast<std::int32_t>(id);
    }
    trace.add(static_cast<std::int32_t>(block), request, static_cast<std::int32_t>(position), ids.data());
  }
  return trace;
}

}  // namespace sy
