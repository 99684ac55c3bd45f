// A recorded routing: the experts each token chose in each block of a real (cpu) run, so that a
// sim run of the same workload loads its experts exactly as the model did.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <istream>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace sy {

class RoutingTrace {
 public:
  struct Shape {
    std::int32_t num_layers = 0;
    std::int32_t num_experts = 0;
    std::int32_t top_k = 0;
  };

  explicit RoutingTrace(Shape shape) : shape_(shape) {}

  // The experts of token `position` of request `request` (its index in the workload) in `block`.
  // A token routed twice keeps its first record.
  void add(std::int32_t block, std::int64_t request, std::int32_t position, const std::int32_t* expert_ids);
  // Fills top_k expert ids; false when the trace holds no such token.
  bool lookup(std::int32_t block, std::int64_t request, std::int32_t position, std::int32_t* expert_ids) const;

  const Shape& shape() const { return shape_; }
  std::size_t size() const { return index_.size(); }

  // Text format, docs/routing-trace.md. write() replaces `path` atomically.
  Status write(const std::filesystem::path& path) const;
  static StatusOr<RoutingTrace> load(const std::filesystem::path& path);
  // The same from a stream; `name` names it in errors.
  static StatusOr<RoutingTrace> parse(std::istream& in, const std::string& name);
  // Beyond any model we serve; bounds what a file can make us allocate (top_k ids per line).
  static constexpr std::int32_t kMaxLayers = 1024;
  static constexpr std::int32_t kMaxExperts = 65536;

 private:
  struct Record {
    std::int64_t request;
    std::int32_t position;
    std::int32_t block;
    bool operator==(const Record&) const = default;
  };
  // Every field whole: a token is found only under its own request, position and block, whatever
  // their values (a packed key made distant tokens alias one another).
  struct RecordHash {
    std::size_t operator()(const Record& r) const;
  };
  Shape shape_;
  std::vector<Record> records_;             // in recording order
  std::vector<std::int32_t> experts_;       // records × top_k
  std::unordered_map<Record, std::size_t, RecordHash> index_;  // token -> its record
};

}  // namespace sy
