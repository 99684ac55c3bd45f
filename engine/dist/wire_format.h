// The bytes of the messages between the processes of a deployment (docs/wire-format.md): a
// type byte, then fixed-width little-endian fields. One writer and one bounds-checked reader
// for every message, so a truncated or foreign message is an error, never a crash.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/status.h"
#include "engine/runtime/placement.h"
#include "engine/runtime/runtime_policy.h"

namespace sy::dist {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian, as the host");

// Bumped whenever a message's layout changes; ranks of different versions refuse each other.
inline constexpr std::uint32_t kWireVersion = 9;

enum class MessageType : std::uint8_t {
  Hello = 1,     // bootstrap: a rank introduces itself to rank 0
  Welcome = 2,   // bootstrap: rank 0's answer, every rank's data endpoint
  Refusal = 3,   // bootstrap: rank 0 refuses the deployment (mismatch), with the reason
  Header = 10,   // phase 1 of a shipment
  Payload = 11,  // phase 2: the shipment's rows and activations
  Drain = 20,    // rank 0 asks for a rank's safe-point state
  Drained = 21,  // the answer: quiescent?, shipments sent to and received from other processes
  Apply = 22,    // rank 0: apply this policy (and placement)
  Applied = 23,  // the acknowledgement
  Shutdown = 24, // rank 0: the run is over
  Heartbeat = 25,  // every 100 ms, rank 0 to the others and the others to rank 0
  Events = 26,     // a rank's runtime events for rank 0's observers
  SequenceOpen = 27,   // rank 0: a request admitted to an attention rank run there (its block table)
  SequenceClose = 28,  // rank 0: that request released
  Sampled = 29,        // an attention device's sampled token (and log-probabilities) for rank 0
  GroupSampled = 30,   // an attention device finished sampling a micro-batch (grouped policies)
  LinkRefused = 31,    // a rank refused a payload whose rows take the device link from the destination
  PromptScores = 32,   // an attention device's prompt log-probabilities of a request, for rank 0
  GuideVocabulary = 33,  // rank 0: the model's guided-decoding vocabulary, before a process's first guided request
};

class ByteWriter {
 public:
  template <class T>
    requires std::is_arithmetic_v<T>
  void put(T v) {
    put_raw(&v, sizeof(T));
  }
  template <class T>
    requires std::is_arithmetic_v<T>
  void put_array(const std::vector<T>& v) {
    put<std::uint64_t>(v.size());
    put_raw(v.data(), v.size() * sizeof(T));
  }
  void put_raw(const void* data, std::size_t n) { bytes_.append(static_cast<const char*>(data), n); }
  // n bytes at the end for the caller to fill (before the next put): where a backend copies
  // its rows to host memory without a copy in between. Any alignment.
  char* put_space(std::size_t n) {
    const std::size_t at = bytes_.size();
    bytes_.resize(at + n);
    return bytes_.data() + at;
  }
  void put_string(std::string_view s) {
    put<std::uint32_t>(static_cast<std::uint32_t>(s.size()));
    put_raw(s.data(), s.size());
  }
  // A string, not a vector of bytes: GCC 12 warns falsely about a byte vector's growth.
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

class ByteReader {
 public:
  ByteReader(const void* data, std::size_t size) : p_(static_cast<const std::uint8_t*>(data)), left_(size) {}

  template <class T>
    requires std::is_arithmetic_v<T>
  Status get(T& v) {
    if (left_ < sizeof(T)) return truncated();
    std::memcpy(&v, p_, sizeof(T));
    advance(sizeof(T));
    return Status::Ok();
  }
  template <class T>
    requires std::is_arithmetic_v<T>
  Status get_array(std::vector<T>& v) {
    std::uint64_t n = 0;
    SY_RETURN_IF_ERROR(get(n));
    if (n > left_ / sizeof(T)) return truncated();
    v.resize(n);
    return get_raw(v.data(), n * sizeof(T));
  }
  Status get_raw(void* out, std::size_t n) {
    if (left_ < n) return truncated();
    if (n) std::memcpy(out, p_, n);
    advance(n);
    return Status::Ok();
  }
  Status get_string(std::string& s) {
    std::uint32_t n = 0;
    SY_RETURN_IF_ERROR(get(n));
    if (n > left_) return truncated();
    s.assign(reinterpret_cast<const char*>(p_), n);
    advance(n);
    return Status::Ok();
  }
  std::size_t left() const { return left_; }
  const std::uint8_t* here() const { return p_; }
  void advance(std::size_t n) {
    p_ += n;
    left_ -= n;
  }

 private:
  static Status truncated() { return Status::Error("message truncated"); }
  const std::uint8_t* p_;
  std::size_t left_;
};

// A writer holding a message's type byte: every message starts with it.
inline ByteWriter message_writer(MessageType type) {
  ByteWriter w;
  w.put<std::uint8_t>(static_cast<std::uint8_t>(type));
  return w;
}

void put_policy(ByteWriter& w, const RuntimePolicy& policy);
Status get_policy(ByteReader& r, RuntimePolicy& policy);
// A placement as its [block][expert] -> devices lists; the reader checks it against the model.
void put_placement(ByteWriter& w, const Placement& placement);
Status get_placement(ByteReader& r, const Placement& shape, Placement& placement);

// A 64-bit FNV-1a digest (of a config file, a layout's text): ranks compare these at start-up.
std::uint64_t digest(std::string_view bytes, std::uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace sy::dist
