#include "engine/dist/bootstrap_messages.h"

#include <cctype>

#include "engine/dist/rank_environment.h"

namespace sy::dist {

bool is_data_endpoint(const std::string& endpoint) {
  constexpr std::string_view kScheme = "tcp://";
  if (!endpoint.starts_with(kScheme)) return false;
  const std::string_view rest = std::string_view(endpoint).substr(kScheme.size());
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == rest.size() || rest.size() - colon - 1 > 5)
    return false;
  if (!is_host_address(rest.substr(0, colon))) return false;
  std::int32_t port = 0;
  for (char c : rest.substr(colon + 1)) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    port = port * 10 + (c - '0');
  }
  return port >= 1 && port <= 65535;
}

std::string encode(const Hello& m) {
  ByteWriter w = message_writer(MessageType::Hello);
  w.put<std::uint32_t>(m.version);
  w.put<std::int32_t>(m.rank);
  w.put<std::int32_t>(m.world);
  w.put_string(m.identity.model);
  w.put<std::uint64_t>(m.identity.model_digest);
  w.put_string(m.identity.layout);
  w.put<std::uint64_t>(m.identity.layout_digest);
  w.put_string(m.identity.layout_text);
  w.put_string(m.identity.command);
  w.put<std::uint64_t>(m.identity.command_digest);
  w.put_string(m.endpoint);
  w.put_string(m.memory);
  return std::move(w.bytes());
}

std::string encode(const Welcome& m) {
  ByteWriter w = message_writer(MessageType::Welcome);
  for (const std::string& e : m.endpoints) w.put_string(e);
  for (const std::string& mem : m.memories) w.put_string(mem);
  w.put_string(m.link_setup);
  return std::move(w.bytes());
}

std::string encode_refusal(const std::string& why) {
  ByteWriter w = message_writer(MessageType::Refusal);
  w.put_string(why);
  return std::move(w.bytes());
}

Status decode(ByteReader& r, Hello& m) {
  SY_RETURN_IF_ERROR(r.get(m.version));
  if (m.version != kWireVersion)
    return Status::Error("wire format version " + std::to_string(m.version) + ", this build speaks " +
                         std::to_string(kWireVersion) + " (run the same switchyard build on every rank)");
  SY_RETURN_IF_ERROR(r.get(m.rank));
  SY_RETURN_IF_ERROR(r.get(m.world));
  SY_RETURN_IF_ERROR(r.get_string(m.identity.model));
  SY_RETURN_IF_ERROR(r.get(m.identity.model_digest));
  SY_RETURN_IF_ERROR(r.get_string(m.identity.layout));
  SY_RETURN_IF_ERROR(r.get(m.identity.layout_digest));
  SY_RETURN_IF_ERROR(r.get_string(m.identity.layout_text));
  SY_RETURN_IF_ERROR(r.get_string(m.identity.command));
  SY_RETURN_IF_ERROR(r.get(m.identity.command_digest));
  SY_RETURN_IF_ERROR(r.get_string(m.endpoint));
  SY_RETURN_IF_ERROR(r.get_string(m.memory));
  if (m.rank < 0 || m.world < 0)
    return Status::Error("rank " + std::to_string(m.rank) + " of world " + std::to_string(m.world));
  // Rank 0 hands it to every rank to connect to: ZeroMQ throws on what it cannot parse.
  if (!is_data_endpoint(m.endpoint)) return Status::Error("data endpoint '" + m.endpoint + "' is not tcp://HOST:PORT");
  return Status::Ok();
}

Status decode(ByteReader& r, std::int32_t world, Welcome& m) {
  m.endpoints.resize(static_cast<std::size_t>(world));
  m.memories.resize(static_cast<std::size_t>(world));
  for (std::string& e : m.endpoints) {
    SY_RETURN_IF_ERROR(r.get_string(e));
    if (!is_data_endpoint(e)) return Status::Error("data endpoint '" + e + "' is not tcp://HOST:PORT");
  }
  for (std::string& mem : m.memories) SY_RETURN_IF_ERROR(r.get_string(mem));
  return r.get_string(m.link_setup);
}

}  // namespace sy::dist
