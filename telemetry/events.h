// The telemetry event records: what every worker reports (spans, μ-queue depths, expert load,
// request lifecycle) as fixed-size little-endian records, the same bytes in the rings, on the
// wire and in the decoder. docs/telemetry-protocol.md documents every field.
#pragma once

#include <bit>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace sy::telemetry {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

// Which lane of a device's timeline row a span belongs to.
enum class Lane : std::uint8_t { Compute = 0, Send = 1, Receive = 2 };

enum class SpanKind : std::uint8_t {
  Attention = 0,     // attention half of a block (router, dense MLP included)
  Expert = 1,        // routed expert FFN(s) of a block
  SharedExpert = 2,  // shared expert (qwen2_moe) when it runs as its own execution
  Sampler = 3,       // final norm, lm_head and sampling
  Transfer = 4,      // bytes on a link: Send lane at the source, Receive lane at the destination
  WeightFetch = 5,   // expert weights paged in from host memory (offload)
  Stall = 6,         // compute lane idle; stall_reason says why
  Merge = 7,         // token pool: a request's K expert outputs (and the shared one) added to its residual
};
inline constexpr std::size_t kSpanKinds = 8;

enum class StallReason : std::uint8_t {
  None = 0,        // not a stall span
  QueueEmpty = 1,  // nothing queued anywhere on the device
  Barrier = 2,     // tokens queued, but the policy waits for a complete (micro-)batch
  Transfer = 3,    // nothing runnable; shipments to this device are on a link
  Weights = 4,     // waiting for expert weights to arrive (offload)
};

// Which kind of μ-queue a LayerId names.
enum class LayerKind : std::uint8_t { Attention = 0, Expert = 1, Sampler = 2 };

enum class RequestPhase : std::uint8_t {
  Arrival = 0,     // reached the coordinator
  Admitted = 1,    // given a DP rank and KV pages
  FirstToken = 2,  // its first output token was sampled
  Finished = 3,    // its last token was sampled (max tokens or EOS)
  Rejected = 4,    // refused by admission (never fits)
};

// One interval on a device's timeline. 48 bytes.
struct Span {
  std::int64_t start_ns = 0;  // run time base (see meta.clock)
  std::int64_t end_ns = 0;
  std::int64_t tokens = 0;      // token rows executed or carried (Sampler: tokens sampled); 0 for stalls
  std::int32_t device = 0;
  std::int32_t block = -1;      // -1: not tied to a block (stalls, sampler)
  std::int32_t index = -1;      // expert id (Expert, WeightFetch), attention rank (Attention, Sampler);
                                // -1: a grouped execution of several experts, or not applicable
  std::int32_t microbatch = -1; // grouped policies' micro-batch; -1 under async
  std::int32_t peer = -1;       // Transfer: the other device (destination on Send, source on Receive)
  Lane lane = Lane::Compute;
  SpanKind kind = SpanKind::Attention;
  StallReason stall_reason = StallReason::None;
  std::uint8_t reserved = 0;
};

// Depth of one μ-queue at one moment. 40 bytes.
struct QueueSample {
  std::int64_t t_ns = 0;
  std::int64_t depth_tokens = 0;
  std::int64_t oldest_age_ns = 0;  // age of the oldest queued token; 0 when empty
  std::int32_t device = 0;
  std::int32_t block = 0;   // the sampler's queue has block = number of blocks
  std::int32_t index = 0;   // expert id, or attention rank
  LayerKind layer = LayerKind::Attention;
  std::uint8_t reserved[3] = {0, 0, 0};
};

// Token rows routed to one expert replica over one window. 40 bytes.
struct ExpertLoad {
  std::int64_t window_start_ns = 0;
  std::int64_t window_end_ns = 0;
  std::int64_t tokens = 0;
  std::int32_t block = 0;
  std::int32_t expert = 0;
  std::int32_t device = 0;  // the replica's device
  std::int32_t reserved = 0;
};

// One step of a request's lifecycle. 32 bytes.
struct RequestEvent {
  std::int64_t t_ns = 0;
  std::int64_t request_id = 0;
  std::int32_t tokens_in = 0;   // prompt length
  std::int32_t tokens_out = 0;  // tokens produced so far
  std::int32_t rank = -1;       // attention DP rank; -1 before admission
  RequestPhase phase = RequestPhase::Arrival;
  std::uint8_t reserved[3] = {0, 0, 0};
};

static_assert(sizeof(Span) == 48 && std::is_trivially_copyable_v<Span>);
static_assert(sizeof(QueueSample) == 40 && std::is_trivially_copyable_v<QueueSample>);
static_assert(sizeof(ExpertLoad) == 40 && std::is_trivially_copyable_v<ExpertLoad>);
static_assert(sizeof(RequestEvent) == 32 && std::is_trivially_copyable_v<RequestEvent>);

// Names as they appear in JSON, SQLite string tables and the console.
std::string_view lane_name(Lane lane);
std::string_view span_kind_name(SpanKind kind);
std::string_view stall_reason_name(StallReason reason);
std::string_view layer_kind_name(LayerKind kind);
std::string_view request_phase_name(RequestPhase phase);

}  // namespace sy::telemetry
