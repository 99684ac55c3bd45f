#include "telemetry/events.h"

namespace sy::telemetry {

// Out-of-range values can arrive from a newer producer or a corrupt file; they get a name that
// says so instead of undefined behaviour.
std::string_view lane_name(Lane lane) {
  switch (lane) {
    case Lane::Compute: return "compute";
    case Lane::Send: return "send";
    case Lane::Receive: return "receive";
  }
  return "unknown";
}

std::string_view span_kind_name(SpanKind kind) {
  switch (kind) {
    case SpanKind::Attention: return "attention";
    case SpanKind::Expert: return "expert";
    case SpanKind::SharedExpert: return "shared_expert";
    case SpanKind::Sampler: return "sampler";
    case SpanKind::Transfer: return "transfer";
    case SpanKind::WeightFetch: return "weight_fetch";
    case SpanKind::Stall: return "stall";
    case SpanKind::Merge: return "merge";
  }
  return "unknown";
}

std::string_view stall_reason_name(StallReason reason) {
  switch (reason) {
    case StallReason::None: return "none";
    case StallReason::QueueEmpty: return "queue_empty";
    case StallReason::Barrier: return "barrier";
    case StallReason::Transfer: return "transfer";
    case StallReason::Weights: return "weights";
  }
  return "unknown";
}

std::string_view layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::Attention: return "attention";
    case LayerKind::Expert: return "expert";
    case LayerKind::Sampler: return "sampler";
  }
  return "unknown";
}

std::string_view request_phase_name(RequestPhase phase) {
  switch (phase) {
    case RequestPhase::Arrival: return "arrival";
    case RequestPhase::Admitted: return "admitted";
    case RequestPhase::FirstToken: return "first_token";
    case RequestPhase::Finished: return "finished";
    case RequestPhase::Rejected: return "rejected";
  }
  return "unknown";
}

}  // namespace sy::telemetry
