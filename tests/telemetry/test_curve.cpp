#include <sys/stat.h>

#include <gtest/gtest.h>

#include <fstream>

#include "telemetry/control_client.h"
#include "telemetry/control_server.h"
#include "telemetry/curve_keys.h"
#include "telemetry/curve_server.h"
#include "telemetry/endpoint.h"
#include "telemetry/subscriber.h"
#include "telemetry/telemetry_hub.h"
#include "tests/telemetry/test_support.h"

namespace sy::telemetry {
namespace {

using namespace std::chrono_literals;
using testing::TempDir;

TEST(CurveKeys, GeneratedPairsAreValidAndDistinct) {
  const CurveKeyPair a = generate_curve_keypair();
  const CurveKeyPair b = generate_curve_keypair();
  EXPECT_TRUE(is_valid_curve_key(a.public_key));
  EXPECT_TRUE(is_valid_curve_key(a.secret_key));
  EXPECT_NE(a.public_key, b.public_key);
  EXPECT_NE(a.secret_key, a.public_key);
  EXPECT_FALSE(is_valid_curve_key("short"));
  EXPECT_FALSE(is_valid_curve_key(std::string(40, '~')));  // not Z85
}

mode_t mode_of(const std::filesystem::path& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return st.st_mode & 0777;
}

TEST(CurveKeys, KeyFilesRoundTripWithSafeModes) {
  TempDir dir;
  const CurveKeyPair pair = generate_curve_keypair();
  ASSERT_TRUE(write_key_file(dir / "x.key", pair, true).ok());
  ASSERT_TRUE(write_key_file(dir / "x.pub", pair, false).ok());
  EXPECT_EQ(mode_of(dir / "x.key"), 0600u);
  EXPECT_EQ(mode_of(dir / "x.pub"), 0644u);
  auto full = read_key_file(dir / "x.key");
  ASSERT_TRUE(full.ok()) << full.status().message();
  EXPECT_EQ(full->public_key, pair.public_key);
  EXPECT_EQ(full->secret_key, pair.secret_key);
  auto pub = read_key_file(dir / "x.pub");
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(pub->public_key, pair.public_key);
  EXPECT_TRUE(pub->secret_key.empty());
  EXPECT_FALSE(std::filesystem::exists(dir / "x.key.tmp"));
}

TEST(CurveKeys, MalformedKeyFilesAreNamed) {
  TempDir dir;
  auto missing = read_key_file(dir / "none.key");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), (dir / "none.key").string() + ": no such file");

  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return read_key_file(dir / name);
  };
  auto r = write("a.key", "# comment\npublic = \"abc\"\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), (dir / "a.key").string() + ":2: 'public' is not a CURVE key (40 characters of Z85)");
  r = write("b.key", "public: x\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("b.key:1: expected"), std::string::npos);
  r = write("c.key", "colour = \"blue\"\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("c.key:1: unknown key 'colour'"), std::string::npos);
  r = write("f.key", "public = abc\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("f.key:1: the value of 'public' must be in double quotes"), std::string::npos);
  r = write("d.key", "\n# only a comment\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no `public"), std::string::npos);
  r = write("e.key", "public = " + std::string(300, 'x') + "\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a key file"), std::string::npos);
}

// The directory `switchyard keys` writes, made here with the library's own functions.
void write_key_dir(const std::filesystem::path& dir, const CurveKeyPair& server, const CurveKeyPair& client) {
  std::filesystem::create_directories(dir / "clients");
  ASSERT_TRUE(write_key_file(dir / "server.key", server, true).ok());
  ASSERT_TRUE(write_key_file(dir / "server.pub", server, false).ok());
  ASSERT_TRUE(write_key_file(dir / "client.key", client, true).ok());
  ASSERT_TRUE(write_key_file(dir / "clients" / "client.pub", client, false).ok());
}

TEST(CurveKeys, KeyDirectoriesLoadForServerAndClient) {
  TempDir dir;
  const CurveKeyPair server = generate_curve_keypair(), client = generate_curve_keypair();
  write_key_dir(dir.path(), server, client);
  auto config = load_curve_server_config(dir.path());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->server.secret_key, server.secret_key);
  EXPECT_EQ(config->authorized_clients, std::vector<std::string>{client.public_key});
  auto keys = load_client_keys(dir.path());
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->server_public_key, server.public_key);
  EXPECT_EQ(keys->client.secret_key, client.secret_key);

  std::filesystem::remove(dir / "clients" / "client.pub");
  auto none = load_curve_server_config(dir.path());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no authorised client keys"), std::string::npos);
  // A public-only file where a pair is needed.
  ASSERT_TRUE(write_key_file(dir / "server.key", server, false).ok());
  auto no_secret = load_curve_server_config(dir.path());
  ASSERT_FALSE(no_secret.ok());
  EXPECT_NE(no_secret.status().message().find("server.key: holds no secret key"), std::string::npos);
}

TEST(Endpoint, LoopbackOrNot) {
  for (const char* e : {"tcp://127.0.0.1:5555", "tcp://127.1.2.3:1", "tcp://localhost:5556", "tcp://[::1]:5555",
                        "ipc:///tmp/sy.sock", "inproc://x"}) {
    EXPECT_TRUE(is_loopback_endpoint(e)) << e;
  }
  for (const char* e : {"tcp://*:5555", "tcp://0.0.0.0:5555", "tcp://10.0.0.5:5555", "tcp://eth0:5555",
                        "tcp://127.0.0.1.evil.com:5555", "tcp://1270.0.0.1:5", "tcp://[::]:5555",
                        "tcp://127.0.0.1:5555;10.0.0.1:5", "udp://127.0.0.1:5", "tcp://127.0.0:5", "127.0.0.1:5555"}) {
    EXPECT_FALSE(is_loopback_endpoint(e)) << e;
  }
  EXPECT_TRUE(check_listen_endpoint("control", "tcp://127.0.0.1:5556", false, false).ok());
  EXPECT_TRUE(check_listen_endpoint("control", "tcp://*:5556", true, false).ok());
  EXPECT_TRUE(check_listen_endpoint("control", "tcp://*:5556", false, true).ok());
  const Status refused = check_listen_endpoint("control", "tcp://*:5556", false, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("refusing to listen for control on tcp://*:5556 without CURVE keys"),
            std::string::npos);
  EXPECT_NE(refused.message().find("--insecure"), std::string::npos);
}

class CurveSockets : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = generate_curve_keypair();
    client_ = generate_curve_keypair();
    config_.server = server_;
    config_.authorized_clients = {client_.public_key};
    good_ = {server_.public_key, client_};
    stranger_ = {server_.public_key, generate_curve_keypair()};
  }
  CurveKeyPair server_, client_;
  CurveServerConfig config_;
  CurveClientKeys good_, stranger_;
};

TEST_F(CurveSockets, OnlyAuthorisedSubscribersReceive) {
  HubOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.curve = config_;
  auto hub = TelemetryHub::start(options);
  ASSERT_TRUE(hub.ok()) << hub.status().message();
  auto good = Subscriber::connect((*hub)->endpoint(), &good_);
  auto stranger = Subscriber::connect((*hub)->endpoint(), &stranger_);
  auto plain = Subscriber::connect((*hub)->endpoint());
  ASSERT_TRUE(good.ok() && stranger.ok() && plain.ok());
  int good_got = 0, others_got = 0;
  // Publish until the authorised client has had plenty; the others must have had nothing meanwhile.
  ASSERT_TRUE(testing::eventually([&] {
    (void)(*hub)->publish_json(Topic::Meta, "{}");
    (*hub)->flush();
    good_got += static_cast<int>((*good)->poll(10ms).size());
    others_got += static_cast<int>((*stranger)->poll(1ms).size() + (*plain)->poll(1ms).size());
    return good_got >= 20;
  }));
  std::this_thread::sleep_for(200ms);
  others_got += static_cast<int>((*stranger)->poll(1ms).size() + (*plain)->poll(1ms).size());
  EXPECT_EQ(others_got, 0);
}

TEST_F(CurveSockets, OnlyAuthorisedControlClientsGetReplies) {
  ControlServerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.curve = config_;
  auto server = ControlServer::start(options, [](nlohmann::json, ControlServer::Reply r) { r({{"ok", true}}); });
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto good = ControlClient::connect((*server)->endpoint(), &good_);
  ASSERT_TRUE(good.ok());
  auto reply = (*good)->call(R"({"cmd":"pause"})", 10s);
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_EQ(*reply, R"({"ok":true})");

  auto stranger = ControlClient::connect((*server)->endpoint(), &stranger_);
  ASSERT_TRUE(stranger.ok());
  EXPECT_FALSE((*stranger)->call(R"({"cmd":"pause"})", 500ms).ok());
  auto plain = ControlClient::connect((*server)->endpoint());
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->call(R"({"cmd":"pause"})", 500ms).ok());
  EXPECT_EQ((*server)->counters().requests, 1u);
  // The authorised client is unaffected by the refused ones.
  EXPECT_TRUE((*good)->call(R"({"cmd":"resume"})", 10s).ok());
}

TEST_F(CurveSockets, BadServerConfigIsRefused) {
  ControlServerOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.curve = config_;
  options.curve->authorized_clients.clear();
  auto server = ControlServer::start(options, [](nlohmann::json, ControlServer::Reply) {});
  ASSERT_FALSE(server.ok());
  EXPECT_NE(server.status().message().find("authorises no client key"), std::string::npos);
  HubOptions hub_options;
  hub_options.endpoint = "tcp://127.0.0.1:*";
  hub_options.curve = config_;
  hub_options.curve->server.secret_key = "not a key";
  auto hub = TelemetryHub::start(hub_options);
  ASSERT_FALSE(hub.ok());
  EXPECT_NE(hub.status().message().find("secret key"), std::string::npos);
}

}  // namespace
}  // namespace sy::telemetry
