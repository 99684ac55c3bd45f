#include "engine/dist/bootstrap.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>

#include "engine/dist/bootstrap_messages.h"
#include "engine/dist/wire_format.h"
#include "telemetry/zmq_curve.h"

namespace sy::dist {
namespace {

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The first line where two texts differ, as "line N: 'theirs' (rank 0: 'ours')".
std::string first_difference(const std::string& theirs, const std::string& ours) {
  std::istringstream a(theirs), b(ours);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ga = static_cast<bool>(std::getline(a, la)), gb = static_cast<bool>(std::getline(b, lb));
    if (!ga && !gb) return "";
    if (!ga) la = "(end)";
    if (!gb) lb = "(end)";
    if (la != lb) return "line " + std::to_string(line) + ": '" + la + "' (rank 0: '" + lb + "')";
  }
}

// What rank `h.rank` runs that rank 0 does not; empty when they agree.
std::string differences(const Hello& mine, const Hello& h) {
  std::string out;
  auto add = [&](const std::string& what) { out += (out.empty() ? "" : "; ") + what; };
  if (h.world != mine.world)
    add("world size " + std::to_string(h.world) + " (rank 0: " + std::to_string(mine.world) + ")");
  if (h.identity.model_digest != mine.identity.model_digest)
    add("model '" + h.identity.model + "' " + hex(h.identity.model_digest) + " (rank 0: '" + mine.identity.model + "' " +
        hex(mine.identity.model_digest) + ")");
  if (h.identity.layout_digest != mine.identity.layout_digest) {
    const std::string line = first_difference(h.identity.layout_text, mine.identity.layout_text);
    add("layout '" + h.identity.layout + "' " + hex(h.identity.layout_digest) + " (rank 0: '" + mine.identity.layout +
        "' " + hex(mine.identity.layout_digest) + ")" +
        (line.empty() ? ", devices on other ranks" : ", differing at " + line));
  }
  if (h.identity.command_digest != mine.identity.command_digest)
    add("command '" + h.identity.command + "' (rank 0: '" + mine.identity.command + "')");
  return out;
}

// This rank's data socket, bound on an ephemeral port of the advertised address (every
// interface when that is not a loopback address).
StatusOr<std::string> bind_data(const RankEnvironment& env, zmq::socket_t& data) {
  const bool loop = is_loopback_address(env.advertise_addr);
  const std::string bind = "tcp://" + std::string(loop ? "127.0.0.1" : "*") + ":*";
  try {
    data.set(zmq::sockopt::rcvhwm, 0);
    listen_securely(data, env.keys.get());
    data.bind(bind);
  } catch (const zmq::error_t& e) {
    return Status::Error("rank " + std::to_string(env.rank) + " cannot bind its data socket at " + bind + ": " + e.what());
  }
  const std::string last = data.get(zmq::sockopt::last_endpoint);
  const auto colon = last.rfind(':');
  return "tcp://" + env.advertise_addr + last.substr(colon);
}

// With keys, a rank given another key directory (or none) fails every handshake and looks
// like one that never came: say so where the bootstrap gives up.
std::string keys_hint(const RankEnvironment& env) {
  if (!env.keys) return "";
  return "; with SWITCHYARD_KEYS='" + env.keys->dir.string() +
         "' only ranks with the same key directory get in: was every rank given it?";
}

std::int64_t ms_left(std::chrono::steady_clock::time_point deadline) {
  return std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
}

std::string seconds(double s) {
  std::ostringstream o;
  o << s << " s";
  return o.str();
}

StatusOr<Welcome> serve_rank0(const RankEnvironment& env, zmq::context_t& ctx, const Hello& mine,
                              const LinkExchange& links) {
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 2000);
  const std::string where = env.master_endpoint();
  // A loopback rendezvous stays on the loopback; any other MASTER_ADDR names this host as the
  // others reach it (often a host name, which ZeroMQ cannot bind): listen on every interface.
  const bool loopback = is_loopback_address(env.master_addr);
  try {
    listen_securely(router, env.keys.get());
    router.bind("tcp://" + (loopback ? std::string("127.0.0.1") : std::string("*")) + ":" +
                std::to_string(env.master_port));
  } catch (const zmq::error_t& e) {
    return Status::Error("rank 0 cannot listen for the other ranks at " + where + " (MASTER_ADDR/MASTER_PORT): " +
                         e.what());
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<std::int64_t>(env.bootstrap_timeout_s * 1000));
  std::map<std::int32_t, std::pair<zmq::message_t, Hello>> joined;  // rank -> (identity, hello)
  std::vector<zmq::message_t> strangers;                            // identities of refused hellos
  std::string errors;
  auto add_error = [&](const std::string& e) { errors += (errors.empty() ? "" : "\n") + e; };
  while (static_cast<std::int32_t>(joined.size()) < env.world - 1) {
    zmq::pollitem_t item{router.handle(), 0, ZMQ_POLLIN, 0};
    const std::int64_t left = ms_left(deadline);
    if (left == 0 || zmq::poll(&item, 1, std::chrono::milliseconds(left)) == 0) {
      std::string missing;
      for (std::int32_t r = 1; r < env.world; ++r)
        if (!joined.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      add_error("rank(s) " + missing + " did not check in at " + where + " within " + seconds(env.bootstrap_timeout_s) +
                keys_hint(env));
      break;
    }
    zmq::message_t id, body;
    if (!router.recv(id) || !id.more() || !router.recv(body)) continue;
    while (body.more()) {  // a foreign peer's extra frames
      zmq::message_t extra;
      if (!router.recv(extra)) break;
    }
    ByteReader r(body.data(), body.size());
    std::uint8_t type = 0;
    Hello h;
    Status s = r.get(type);
    if (s.ok() && type != static_cast<std::uint8_t>(MessageType::Hello)) s = Status::Error("not a hello");
    if (s.ok()) s = decode(r, h);
    if (!s.ok()) {
      add_error("a peer at " + where + " sent no valid hello: " + s.message());
      strangers.push_back(std::move(id));
      continue;
    }
    if (h.rank <= 0 || h.rank >= env.world || joined.count(h.rank)) {
      add_error("a second rank " + std::to_string(h.rank) + " checked in (world size " + std::to_string(env.world) + ")");
      strangers.push_back(std::move(id));
      continue;
    }
    if (const std::string d = differences(mine, h); !d.empty())
      add_error("rank " + std::to_string(h.rank) + " runs " + d);
    joined.emplace(h.rank, std::make_pair(std::move(id), std::move(h)));
  }
  Welcome welcome;
  welcome.endpoints.resize(static_cast<std::size_t>(env.world));
  welcome.memories.resize(static_cast<std::size_t>(env.world));
  welcome.endpoints[0] = mine.endpoint;
  welcome.memories[0] = mine.memory;
  for (auto& [rank, entry] : joined) {
    welcome.endpoints[static_cast<std::size_t>(rank)] = entry.second.endpoint;
    welcome.memories[static_cast<std::size_t>(rank)] = entry.second.memory;
  }
  // Only once every rank has checked in and agrees: the setup may reserve resources (NCCL's
  // unique ids listen for their ranks).
  if (errors.empty() && links.setup) {
    auto setup = links.setup(welcome.memories);
    if (setup.ok())
      welcome.link_setup = std::move(*setup);
    else
      add_error("device links between the ranks: " + setup.status().message());
  }
  const std::string answer = errors.empty() ? encode(welcome) : encode_refusal(errors);
  auto reply = [&](zmq::message_t& id) {
    router.send(zmq::buffer(id.data(), id.size()), zmq::send_flags::sndmore);
    router.send(zmq::buffer(answer), zmq::send_flags::none);
  };
  for (auto& [rank, entry] : joined) reply(entry.first);
  for (auto& id : strangers) reply(id);
  if (!errors.empty()) return Status::Error("bootstrap refused:\n" + errors);
  return welcome;
}

StatusOr<Welcome> join_rank0(const RankEnvironment& env, zmq::context_t& ctx, const Hello& mine) {
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  const std::string where = env.master_endpoint();
  try {
    connect_securely(dealer, env.keys.get());
    dealer.connect(where);
  } catch (const zmq::error_t& e) {
    return Status::Error("rank " + std::to_string(env.rank) + " cannot connect to rank 0 at " + where +
                         " (MASTER_ADDR/MASTER_PORT): " + e.what());
  }
  const std::string hello = encode(mine);
  dealer.send(zmq::buffer(hello), zmq::send_flags::none);
  zmq::pollitem_t item{dealer.handle(), 0, ZMQ_POLLIN, 0};
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(env.bootstrap_timeout_s * 1000));
  zmq::message_t body;
  if (zmq::poll(&item, 1, timeout) == 0 || !dealer.recv(body))
    return Status::Error("rank " + std::to_string(env.rank) + " could not reach rank 0 at " + where + " within " +
                         seconds(env.bootstrap_timeout_s) +
                         " (is rank 0 running? MASTER_ADDR/MASTER_PORT, SWITCHYARD_BOOTSTRAP_TIMEOUT)" + keys_hint(env));
  ByteReader r(body.data(), body.size());
  std::uint8_t type = 0;
  SY_RETURN_IF_ERROR(r.get(type));
  if (type == static_cast<std::uint8_t>(MessageType::Refusal)) {
    std::string why;
    SY_RETURN_IF_ERROR(r.get_string(why));
    return Status::Error("rank 0 at " + where + " refused the deployment:\n" + why);
  }
  if (type != static_cast<std::uint8_t>(MessageType::Welcome))
    return Status::Error("rank 0 at " + where + " answered with message type " + std::to_string(type));
  Welcome welcome;
  if (const Status st = decode(r, env.world, welcome); !st.ok())
    return Status::Error("rank 0 at " + where + " answered with a malformed welcome: " + st.message());
  return welcome;
}

}  // namespace

void listen_securely(zmq::socket_t& socket, const RankKeys* keys) {
  if (keys) telemetry::set_curve_server(socket, keys->server);
}

void connect_securely(zmq::socket_t& socket, const RankKeys* keys) {
  if (keys) telemetry::set_curve_client(socket, keys->client);
}

StatusOr<Rendezvous> bootstrap(const RankEnvironment& env, const RunIdentity& identity, const LinkExchange& links) {
  Rendezvous out;
  out.context = std::make_unique<zmq::context_t>(1);
  if (env.keys) {
    // Before any CURVE socket binds: a handshake with no handler present is not checked.
    auto zap = telemetry::ZapHandler::start(*out.context, env.keys->server.authorized_clients);
    if (!zap.ok())
      return Status::Error("rank " + std::to_string(env.rank) + ": SWITCHYARD_KEYS='" + env.keys->dir.string() +
                           "': " + zap.status().message());
    out.zap = std::move(*zap);
    out.keys = env.keys;
  }
  out.data = zmq::socket_t(*out.context, zmq::socket_type::pull);
  out.data.set(zmq::sockopt::linger, 0);
  auto endpoint = bind_data(env, out.data);
  if (!endpoint.ok()) return endpoint.status();
  Hello mine{kWireVersion, env.rank, env.world, identity, *endpoint, links.memory};
  auto welcome = env.rank == 0 ? serve_rank0(env, *out.context, mine, links) : join_rank0(env, *out.context, mine);
  if (!welcome.ok()) return welcome.status();
  out.endpoints = std::move(welcome->endpoints);
  out.memories = std::move(welcome->memories);
  out.link_setup = std::move(welcome->link_setup);
  return out;
}

}  // namespace sy::dist
