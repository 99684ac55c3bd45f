#include "engine/dist/control_messages.h"

namespace sy::dist {
namespace {

// Loop clocks count nanoseconds from the loop's start: a time beyond 2⁶² (146 years) no clock
// gives, and below it the four times' differences and sums cannot overflow.
constexpr std::int64_t kTimeBound = std::int64_t{1} << 62;

Status rank_field(std::int32_t rank) {
  return rank >= 0 ? Status::Ok() : Status::Error("rank " + std::to_string(rank));
}

Status time_field(const char* what, std::int64_t t, std::int64_t lowest) {
  if (t >= lowest && t < kTimeBound) return Status::Ok();
  return Status::Error(std::string(what) + " " + std::to_string(t) + " is no loop time");
}

}  // namespace

std::string encode(const DrainRequest& m) {
  ByteWriter w = message_writer(MessageType::Drain);
  w.put<std::uint64_t>(m.epoch);
  return std::move(w.bytes());
}

std::string encode(const DrainAnswer& m) {
  ByteWriter w = message_writer(MessageType::Drained);
  w.put<std::uint64_t>(m.epoch);
  w.put<std::int32_t>(m.rank);
  w.put<std::uint8_t>(m.quiescent ? 1 : 0);
  w.put<std::uint64_t>(m.sent);
  w.put<std::uint64_t>(m.received);
  return std::move(w.bytes());
}

std::string encode(const ApplyChange& m) {
  ByteWriter w = message_writer(MessageType::Apply);
  w.put<std::uint64_t>(m.epoch);
  put_policy(w, m.policy);
  w.put<std::uint8_t>(m.placement ? 1 : 0);
  if (m.placement) put_placement(w, *m.placement);
  return std::move(w.bytes());
}

std::string encode(const ApplyAnswer& m) {
  ByteWriter w = message_writer(MessageType::Applied);
  w.put<std::uint64_t>(m.epoch);
  return std::move(w.bytes());
}

std::string encode(const Heartbeat& m) {
  ByteWriter w = message_writer(MessageType::Heartbeat);
  w.put<std::int32_t>(m.rank);
  w.put<std::uint32_t>(m.run);
  w.put<std::int64_t>(m.sent);
  w.put<std::int64_t>(m.echoed_sent);
  w.put<std::int64_t>(m.echoed_arrival);
  return std::move(w.bytes());
}

std::string encode(const LinkRefusal& m) {
  ByteWriter w = message_writer(MessageType::LinkRefused);
  w.put<std::int32_t>(m.rank);
  w.put_string(m.why);
  return std::move(w.bytes());
}

Status decode(ByteReader& r, DrainRequest& m) { return r.get(m.epoch); }

Status decode(ByteReader& r, DrainAnswer& m) {
  std::uint8_t quiescent = 0;
  SY_RETURN_IF_ERROR(r.get(m.epoch));
  SY_RETURN_IF_ERROR(r.get(m.rank));
  SY_RETURN_IF_ERROR(r.get(quiescent));
  SY_RETURN_IF_ERROR(r.get(m.sent));
  SY_RETURN_IF_ERROR(r.get(m.received));
  if (quiescent > 1) return Status::Error("quiescent flag " + std::to_string(quiescent));
  m.quiescent = quiescent != 0;
  return rank_field(m.rank);
}

Status decode(ByteReader& r, const Placement& shape, ApplyChange& m) {
  std::uint8_t has_placement = 0;
  SY_RETURN_IF_ERROR(r.get(m.epoch));
  SY_RETURN_IF_ERROR(get_policy(r, m.policy));
  SY_RETURN_IF_ERROR(r.get(has_placement));
  if (has_placement > 1) return Status::Error("placement flag " + std::to_string(has_placement));
  m.placement.reset();
  if (!has_placement) return Status::Ok();
  m.placement.emplace();
  return get_placement(r, shape, *m.placement);
}

Status decode(ByteReader& r, ApplyAnswer& m) { return r.get(m.epoch); }

Status decode(ByteReader& r, Heartbeat& m) {
  SY_RETURN_IF_ERROR(r.get(m.rank));
  SY_RETURN_IF_ERROR(r.get(m.run));
  SY_RETURN_IF_ERROR(r.get(m.sent));
  SY_RETURN_IF_ERROR(r.get(m.echoed_sent));
  SY_RETURN_IF_ERROR(r.get(m.echoed_arrival));
  SY_RETURN_IF_ERROR(rank_field(m.rank));
  SY_RETURN_IF_ERROR(time_field("send time", m.sent, 0));
  SY_RETURN_IF_ERROR(time_field("echoed send time", m.echoed_sent, -1));
  return time_field("echoed arrival", m.echoed_arrival, 0);
}

Status decode(ByteReader& r, LinkRefusal& m) {
  SY_RETURN_IF_ERROR(r.get(m.rank));
  SY_RETURN_IF_ERROR(r.get_string(m.why));
  return rank_field(m.rank);
}

}  // namespace sy::dist
