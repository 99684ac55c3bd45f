// CURVE on the sockets between ranks (SWITCHYARD_KEYS): the key directory's checks, a stranger
// without the keys (no CURVE, an unauthorised client pair, another server's key) that pushes at a
// keyed rank's data socket gets nothing delivered while the ranks keep talking, and a stranger at
// rank 0's bootstrap socket no longer refuses a keyed deployment. Ranks on threads of this
// process over the loopback.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/dist/bootstrap.h"
#include "engine/dist/process_links.h"
#include "engine/dist/rank_keys.h"
#include "telemetry/zmq_curve.h"
#include "tests/dist/two_ranks.h"
#include "tests/support/free_port.h"

namespace sy::dist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using telemetry::CurveKeyPair;
using telemetry::generate_curve_keypair;

bool has(const std::string& text, const std::string& fragment) { return text.find(fragment) != std::string::npos; }

// A key directory as `switchyard keys --out DIR --client rank` writes it.
fs::path make_key_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("sy_test_rank_keys_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "clients");
  const CurveKeyPair server = generate_curve_keypair(), rank = generate_curve_keypair();
  EXPECT_TRUE(telemetry::write_key_file(dir / "server.key", server, true).ok());
  EXPECT_TRUE(telemetry::write_key_file(dir / "server.pub", server, false).ok());
  EXPECT_TRUE(telemetry::write_key_file(dir / "rank.key", rank, true).ok());
  EXPECT_TRUE(telemetry::write_key_file(dir / "clients" / "rank.pub", rank, false).ok());
  return dir;
}

std::shared_ptr<const RankKeys> keys_of(const fs::path& dir) {
  auto keys = load_rank_keys(dir);
  EXPECT_TRUE(keys.ok()) << keys.status().message();
  return keys.ok() ? std::make_shared<const RankKeys>(std::move(*keys)) : nullptr;
}

TEST(RankKeys, ADirectoryFromSwitchyardKeysLoads) {
  const fs::path dir = make_key_dir("good");
  auto keys = load_rank_keys(dir);
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->client.server_public_key, keys->server.server.public_key);
  ASSERT_EQ(keys->server.authorized_clients.size(), 1u);
  EXPECT_EQ(keys->server.authorized_clients[0], keys->client.client.public_key);
  fs::remove_all(dir);
}

// Each mistake is named with the variable, the file and the problem, instead of a bootstrap
// that would only time out.
TEST(RankKeys, EveryMistakeNamesTheVariableAndTheFile) {
  const fs::path dir = make_key_dir("bad");
  const std::string var = "SWITCHYARD_KEYS='" + dir.string() + "': ";
  auto error = [](const fs::path& d) {
    auto keys = load_rank_keys(d);
    return keys.ok() ? std::string("(loaded)") : keys.status().message();
  };
  EXPECT_TRUE(has(error(dir / "nope"), "SWITCHYARD_KEYS='" + (dir / "nope").string() + "': no such directory"))
      << error(dir / "nope");
  EXPECT_TRUE(has(error(dir / "server.pub"), "not a directory")) << error(dir / "server.pub");

  // No client pair for the ranks.
  fs::rename(dir / "rank.key", dir / "rank.key.away");
  EXPECT_TRUE(has(error(dir), var + (dir / "rank.key").string() + ": no such file")) << error(dir);
  EXPECT_TRUE(has(error(dir), "--client rank")) << error(dir);
  fs::rename(dir / "rank.key.away", dir / "rank.key");

  // A malformed key.
  const CurveKeyPair rank = *telemetry::read_key_file(dir / "rank.key");
  std::ofstream(dir / "rank.key") << "public = \"" << rank.public_key << "\"\nsecret = \"not a key\"\n";
  EXPECT_TRUE(has(error(dir), var + (dir / "rank.key").string() + ":2: 'secret' is not a CURVE key")) << error(dir);
  ASSERT_TRUE(telemetry::write_key_file(dir / "rank.key", rank, true).ok());

  // The rank pair not authorised: the ranks would refuse each other.
  fs::rename(dir / "clients" / "rank.pub", dir / "rank.pub.away");
  EXPECT_TRUE(has(error(dir), var + (dir / "clients").string() + ": no authorised client keys")) << error(dir);
  const CurveKeyPair other = generate_curve_keypair();
  ASSERT_TRUE(telemetry::write_key_file(dir / "clients" / "console.pub", other, false).ok());
  EXPECT_TRUE(has(error(dir), var + (dir / "rank").string() + ".key is not authorised: no " +
                                  (dir / "clients" / "rank.pub").string()))
      << error(dir);
  fs::rename(dir / "rank.pub.away", dir / "clients" / "rank.pub");

  // server.pub of another server.
  ASSERT_TRUE(telemetry::write_key_file(dir / "server.pub", other, false).ok());
  EXPECT_TRUE(has(error(dir), var + (dir / "server.pub").string() + " is not the public key of")) << error(dir);
  fs::remove_all(dir);
}

std::string payload(char marker) { return std::string{static_cast<char>(MessageType::Payload), marker}; }

// A peer outside the deployment pushing at `endpoint`, with no CURVE (null), or as a CURVE client
// with `keys`.
struct Stranger {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::push};
  Stranger(const std::string& endpoint, const telemetry::CurveClientKeys* keys) {
    socket.set(zmq::sockopt::linger, 0);
    if (keys) telemetry::set_curve_client(socket, *keys);
    socket.connect(endpoint);
  }
  void send(const std::string& message) { (void)socket.send(zmq::buffer(message), zmq::send_flags::dontwait); }
};

// What rank 0's Payload handler saw of two keyed (or plain) ranks while strangers pushed at it.
struct Outcome {
  std::string seen;              // the markers of the payloads rank 0 took, in order
  std::string seen_by_one;       // and rank 1
  std::uint64_t refused = 0;     // handshakes rank 0's ZAP handler refused
  int lost = 0;                  // ranks either side took for dead
};

Outcome strangers_push(const std::shared_ptr<const RankKeys>& keys) {
  std::vector<Rendezvous> rv = two_ranks(keys);
  telemetry::ZapHandler* zap = rv[0].zap.get();
  const std::string endpoint = rv[0].endpoints[0];
  ProcessLinks zero(std::move(rv[0]), 0), one(std::move(rv[1]), 1);
  std::mutex mutex;
  Outcome out;
  zero.on(MessageType::Payload, [&](ByteReader& r) {
    std::uint8_t m = 0;
    (void)r.get(m);
    std::lock_guard lock(mutex);
    out.seen += static_cast<char>(m);
  });
  one.on(MessageType::Payload, [&](ByteReader& r) {
    std::uint8_t m = 0;
    (void)r.get(m);
    std::lock_guard lock(mutex);
    out.seen_by_one += static_cast<char>(m);
  });
  std::atomic<int> lost{0};
  const auto now = [] { return std::chrono::steady_clock::now().time_since_epoch().count(); };
  zero.watch({1}, 400'000'000, 10'000'000'000, [&](std::int32_t, double) { ++lost; }, now);
  one.watch({0}, 400'000'000, 10'000'000'000, [&](std::int32_t, double) { ++lost; }, now);
  zero.start();
  one.start();
  one.send(0, payload('a'));

  // No CURVE at all; a client pair the directory does not authorise (with the right server key);
  // the right client pair but another server's key (a rank of another deployment).
  const CurveKeyPair server = generate_curve_keypair();
  const telemetry::CurveClientKeys unauthorised{keys ? keys->client.server_public_key : server.public_key,
                                                generate_curve_keypair()};
  const telemetry::CurveClientKeys other_server{server.public_key,
                                                keys ? keys->client.client : generate_curve_keypair()};
  Stranger plain(endpoint, nullptr), forged(endpoint, keys ? &unauthorised : nullptr),
      foreign(endpoint, keys ? &other_server : nullptr);
  plain.send(payload('x'));
  forged.send(payload('y'));
  foreign.send(payload('z'));
  // Until the ZAP handler has refused the forged pair (with keys), or the strangers' messages
  // arrived (without): long enough for every handshake to have been tried.
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard lock(mutex);
      if (keys ? zap->refused() > 0 : out.seen.size() >= 4) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  std::this_thread::sleep_for(300ms);  // and for anything that got through to be handled
  // The ranks keep talking, both ways, and beating.
  one.send(0, payload('b'));
  zero.send(1, payload('c'));
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard lock(mutex);
      if (out.seen.find('b') != std::string::npos && !out.seen_by_one.empty()) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  std::this_thread::sleep_for(500ms);
  one.stop();
  zero.stop();
  out.refused = zap ? zap->refused() : 0;
  out.lost = lost.load();
  return out;
}

TEST(RankKeys, StrangersPushingAtAKeyedDataSocketGetNothingDelivered) {
  const fs::path dir = make_key_dir("links");
  const Outcome o = strangers_push(keys_of(dir));
  EXPECT_EQ(o.seen, "ab") << "a stranger's payload reached rank 0's handler";
  EXPECT_EQ(o.seen_by_one, "c");
  EXPECT_GE(o.refused, 1u) << "the unauthorised client pair was never refused by the ZAP handler";
  EXPECT_EQ(o.lost, 0) << "a rank stopped beating amid the strangers' attempts";
  fs::remove_all(dir);
}

// The threat the keys answer: without them every stranger's payload is handed to the handler
// (where only the wire format's checks stand between it and the run).
TEST(RankKeys, WithoutKeysTheSameStrangersGetThrough) {
  const Outcome o = strangers_push(nullptr);
  std::string sorted = o.seen;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, "abxyz");
}

struct Ranked {
  bool ok = false;
  std::string error;
};

// Ranks 0 and 1 of a world of two on threads, rank r with keys[r] (null: none); `meanwhile`
// runs once rank 0 listens.
std::array<Ranked, 2> bootstrap_two(const std::array<std::shared_ptr<const RankKeys>, 2>& keys, double timeout_s,
                                    const std::function<void(const std::string& master)>& meanwhile = nullptr) {
  const auto port = static_cast<std::uint16_t>(test::free_port());
  std::array<Ranked, 2> out;
  std::vector<std::thread> threads;
  for (std::int32_t r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      RankEnvironment env;
      env.rank = r;
      env.world = 2;
      env.launcher = "env";
      env.master_port = port;
      env.bootstrap_timeout_s = timeout_s;
      env.keys = keys[static_cast<std::size_t>(r)];
      // Rank 1 after the strangers, so that rank 0 would take their hellos first.
      if (r == 1 && meanwhile) std::this_thread::sleep_for(700ms);
      auto rv = bootstrap(env, RunIdentity{"m", 1, "l", 2, "text", "c", 3});
      out[static_cast<std::size_t>(r)] = {rv.ok(), rv.ok() ? "" : rv.status().message()};
    });
  if (meanwhile) {
    std::this_thread::sleep_for(200ms);
    meanwhile("tcp://127.0.0.1:" + std::to_string(port));
  }
  for (std::thread& t : threads) t.join();
  return out;
}

// Without keys a stranger's message at rank 0's bootstrap socket refuses the deployment (it is
// not a valid hello); with keys it never arrives and the ranks meet.
TEST(RankKeys, AStrangerAtAKeyedBootstrapSocketIsKeptOut) {
  const fs::path dir = make_key_dir("bootstrap");
  const auto keys = keys_of(dir);
  const auto hello_from_stranger = [](const std::string& master) {
    zmq::context_t context(1);
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.connect(master);
    dealer.send(zmq::str_buffer("\x01not a hello"), zmq::send_flags::dontwait);
    std::this_thread::sleep_for(1500ms);  // until both ranks are in
  };
  const auto keyed = bootstrap_two({keys, keys}, 20, hello_from_stranger);
  EXPECT_TRUE(keyed[0].ok) << keyed[0].error;
  EXPECT_TRUE(keyed[1].ok) << keyed[1].error;
  const auto plain = bootstrap_two({nullptr, nullptr}, 20, hello_from_stranger);
  EXPECT_FALSE(plain[0].ok);
  EXPECT_TRUE(has(plain[0].error, "sent no valid hello")) << plain[0].error;
  fs::remove_all(dir);
}

// A rank given another key directory never gets in: both sides give up at the bootstrap timeout
// and say that the keys may differ.
TEST(RankKeys, ARankWithOtherKeysIsNotAdmitted) {
  const fs::path a = make_key_dir("a"), b = make_key_dir("b");
  const auto out = bootstrap_two({keys_of(a), keys_of(b)}, 1.5);
  EXPECT_FALSE(out[0].ok);
  EXPECT_TRUE(has(out[0].error, "rank(s) 1 did not check in")) << out[0].error;
  EXPECT_TRUE(has(out[0].error, "SWITCHYARD_KEYS")) << out[0].error;
  EXPECT_FALSE(out[1].ok);
  EXPECT_TRUE(has(out[1].error, "could not reach rank 0")) << out[1].error;
  EXPECT_TRUE(has(out[1].error, "SWITCHYARD_KEYS")) << out[1].error;
  fs::remove_all(a);
  fs::remove_all(b);
}

}  // namespace
}  // namespace sy::dist
