// Which rank a process is, from each launcher's variables, and the errors for bad values.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/dist/rank_environment.h"

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
  auto plain = from({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "4000"}});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->launcher, "env");
  EXPECT_EQ(plain->rank, 3);
  EXPECT_EQ(plain->master_endpoint(), "tcp://10.0.0.5:4000");
  // Off the loopback, the others reach this rank at its host name unless told otherwise.
  EXPECT_NE(plain->advertise_addr, "127.0.0.1");
  auto told = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.5"}, {"SWITCHYARD_ADVERTISE_ADDR", "10.0.0.7"}});
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

}  // namespace
}  // namespace sy::dist
