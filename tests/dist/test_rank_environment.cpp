// Which rank a process is, from each launcher's variables, and the errors for bad values; the
// rule that ranks listening beyond loopback need SWITCHYARD_KEYS or SWITCHYARD_INSECURE=1.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "engine/dist/rank_environment.h"
#include "telemetry/curve_keys.h"

namespace sy::dist {
namespace {

StatusOr<RankEnvironment> from(const std::map<std::string, std::string>& vars) {
  return RankEnvironment::from([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(RankEnvironment, NoLauncherIsOneProcess) {
  auto env = from({});
  ASSERT_TRUE(env.ok());
  EXPECT_FALSE(env->distributed());
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world, 1);
  EXPECT_EQ(env->launcher, "none");
  EXPECT_EQ(env->master_endpoint(), "tcp://127.0.0.1:" + std::to_string(kDefaultMasterPort));
}

TEST(RankEnvironment, EachLauncherIsRecognised) {
  auto mpi = from({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  ASSERT_TRUE(mpi.ok());
  EXPECT_EQ(mpi->launcher, "mpirun");
  EXPECT_EQ(mpi->rank, 2);
  EXPECT_EQ(mpi->world, 4);
  EXPECT_EQ(mpi->local_rank, 1);
  auto slurm = from({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}});
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(slurm->launcher, "srun");
  EXPECT_EQ(slurm->rank, 1);
  auto plain = from({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "4000"},
                     {"SWITCHYARD_INSECURE", "1"}});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->launcher, "env");
  EXPECT_EQ(plain->rank, 3);
  EXPECT_EQ(plain->master_endpoint(), "tcp://10.0.0.5:4000");
  // Off the loopback, the others reach this rank at its host name unless told otherwise.
  EXPECT_NE(plain->advertise_addr, "127.0.0.1");
  auto told = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.5"}, {"SWITCHYARD_ADVERTISE_ADDR", "10.0.0.7"},
                    {"SWITCHYARD_INSECURE", "1"}});
  ASSERT_TRUE(told.ok());
  EXPECT_EQ(told->advertise_addr, "10.0.0.7");
}

TEST(RankEnvironment, MpirunWinsOverPlainVariables) {
  auto env = from({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "3"}, {"RANK", "0"}, {"WORLD_SIZE", "9"}});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->launcher, "mpirun");
  EXPECT_EQ(env->world, 3);
}

TEST(RankEnvironment, BadValuesNameTheVariable) {
  struct Case {
    std::map<std::string, std::string> vars;
    std::string fragment;
  };
  const Case cases[] = {
      {{{"RANK", "4"}, {"WORLD_SIZE", "4"}}, "RANK='4'"},
      {{{"RANK", "x"}, {"WORLD_SIZE", "4"}}, "RANK='x'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE='0'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT='70000'"},
      {{{"SWITCHYARD_BOOTSTRAP_TIMEOUT", "-1"}}, "SWITCHYARD_BOOTSTRAP_TIMEOUT='-1'"},
      // IPv6 is neither bound nor reached: refused rather than listening on every interface.
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "::1"}}, "MASTER_ADDR='::1': IPv6 addresses are not supported"},
      {{{"SWITCHYARD_ADVERTISE_ADDR", "fe80::1"}}, "SWITCHYARD_ADVERTISE_ADDR='fe80::1': IPv6"},
      // Ranks refuse an endpoint that is not tcp://HOST:PORT (bootstrap_messages.h).
      {{{"SWITCHYARD_ADVERTISE_ADDR", "node 2"}}, "SWITCHYARD_ADVERTISE_ADDR='node 2': not a host name or IPv4"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "tcp://n1"}}, "MASTER_ADDR='tcp://n1'"},
  };
  for (const Case& c : cases) {
    auto env = from(c.vars);
    ASSERT_FALSE(env.ok()) << c.fragment;
    EXPECT_NE(env.status().message().find(c.fragment), std::string::npos) << env.status().message();
  }
}

bool has(const std::string& text, const std::string& fragment) { return text.find(fragment) != std::string::npos; }

// Ranks whose sockets would listen on every interface need keys, or the operator's word.
TEST(RankEnvironment, BeyondLoopbackWithoutKeysIsRefusedNamingEveryWayOut) {
  for (const auto& [vars, named] : std::vector<std::pair<std::map<std::string, std::string>, std::string>>{
           {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.5"}}, "MASTER_ADDR='10.0.0.5'"},
           {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node-a"}}, "MASTER_ADDR='node-a'"},
           // Rank 0 on the loopback, but this rank's data socket on every interface.
           {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SWITCHYARD_ADVERTISE_ADDR", "10.0.0.7"}},
            "SWITCHYARD_ADVERTISE_ADDR='10.0.0.7'"},
           {{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "3"}, {"MASTER_ADDR", "10.0.0.5"},
             {"SWITCHYARD_INSECURE", "0"}},
            "MASTER_ADDR='10.0.0.5'"},
       }) {
    auto env = from(vars);
    ASSERT_FALSE(env.ok()) << named;
    const std::string& m = env.status().message();
    EXPECT_TRUE(has(m, named)) << m;
    EXPECT_TRUE(has(m, "SWITCHYARD_KEYS=DIR")) << m;
    EXPECT_TRUE(has(m, "switchyard keys --out DIR --client rank")) << m;
    EXPECT_TRUE(has(m, "SWITCHYARD_INSECURE=1")) << m;
  }
}

TEST(RankEnvironment, InsecureOrLoopbackOrOneProcessNeedsNoKeys) {
  auto insecure = from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.5"}, {"SWITCHYARD_INSECURE", "1"}});
  ASSERT_TRUE(insecure.ok()) << insecure.status().message();
  EXPECT_TRUE(insecure->insecure);
  EXPECT_EQ(insecure->keys, nullptr);
  EXPECT_TRUE(insecure->listens_beyond_loopback());
  auto loopback = from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "localhost"}});
  ASSERT_TRUE(loopback.ok()) << loopback.status().message();
  EXPECT_FALSE(loopback->listens_beyond_loopback());
  EXPECT_EQ(loopback->keys, nullptr);
  // One process listens nowhere: neither the rule nor the key directory applies.
  auto one = from({{"MASTER_ADDR", "10.0.0.5"}, {"SWITCHYARD_KEYS", "/no/such/dir"}, {"SWITCHYARD_INSECURE", "yes"}});
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->keys, nullptr);
  auto bad = from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SWITCHYARD_INSECURE", "yes"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(has(bad.status().message(), "SWITCHYARD_INSECURE='yes': expected 1")) << bad.status().message();
}

TEST(RankEnvironment, KeysAreReadFromTheDirectoryAndABadOneIsNamed) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("sy_test_rank_env_keys_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "clients");
  const auto server = telemetry::generate_curve_keypair(), rank = telemetry::generate_curve_keypair();
  ASSERT_TRUE(telemetry::write_key_file(dir / "server.key", server, true).ok());
  ASSERT_TRUE(telemetry::write_key_file(dir / "server.pub", server, false).ok());
  ASSERT_TRUE(telemetry::write_key_file(dir / "rank.key", rank, true).ok());
  ASSERT_TRUE(telemetry::write_key_file(dir / "clients" / "rank.pub", rank, false).ok());
  auto keyed = from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.5"}, {"SWITCHYARD_KEYS", dir.string()}});
  ASSERT_TRUE(keyed.ok()) << keyed.status().message();
  ASSERT_NE(keyed->keys, nullptr);
  EXPECT_EQ(keyed->keys->dir, dir);
  EXPECT_EQ(keyed->keys->client.client.public_key, rank.public_key);
  EXPECT_EQ(keyed->keys->server.server.secret_key, server.secret_key);
  // Asked for, keys are read on the loopback too, and a bad directory is an error there as well.
  auto missing = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SWITCHYARD_KEYS", (dir / "nope").string()}});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(has(missing.status().message(), "SWITCHYARD_KEYS='" + (dir / "nope").string() + "': no such directory"))
      << missing.status().message();
  fs::remove(dir / "server.key");
  auto no_server = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SWITCHYARD_KEYS", dir.string()}});
  ASSERT_FALSE(no_server.ok());
  EXPECT_TRUE(has(no_server.status().message(),
                  "SWITCHYARD_KEYS='" + dir.string() + "': " + (dir / "server.key").string() + ": no such file"))
      << no_server.status().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sy::dist
