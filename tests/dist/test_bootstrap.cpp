// The bootstrap carries what the ranks' device links need: every rank's memory identity in its
// hello, and rank 0's setup bytes (NCCL's unique ids on the cuda backend), opaque here, in the
// Welcome. Three ranks on threads of this process over the loopback, no GPU.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <string>
#include <thread>
#include <vector>

#include "engine/dist/bootstrap.h"
#include "tests/support/free_port.h"

namespace sy::dist {
namespace {

std::uint16_t free_port() { return static_cast<std::uint16_t>(test::free_port()); }

struct Outcome {
  bool ok = false;
  std::string error;
  Rendezvous rendezvous;
};

// World of three: rank r says memories[r]; rank 0 answers with `setup` (unset: none).
std::array<Outcome, 3> run_three(const std::array<std::string, 3>& memories,
                                 std::function<StatusOr<std::string>(const std::vector<std::string>&)> setup) {
  const std::uint16_t port = free_port();
  std::array<Outcome, 3> out;
  std::vector<std::thread> threads;
  for (std::int32_t r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      RankEnvironment env;
      env.rank = r;
      env.world = 3;
      env.launcher = "env";
      env.master_port = port;
      env.bootstrap_timeout_s = 20;
      LinkExchange links;
      links.memory = memories[static_cast<std::size_t>(r)];
      if (r == 0) links.setup = setup;
      auto rv = bootstrap(env, RunIdentity{"m", 1, "l", 2, "text", "c", 3}, links);
      Outcome& o = out[static_cast<std::size_t>(r)];
      o.ok = rv.ok();
      if (rv.ok())
        o.rendezvous = std::move(*rv);
      else
        o.error = rv.status().message();
    });
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(Bootstrap, CarriesMemoriesAndRankZerosSetupBytesToEveryRank) {
  // Opaque bytes: NULs and every byte value, as NCCL's unique ids have.
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  bytes += std::string(3, '\0');
  std::vector<std::string> seen;
  const auto out = run_three({"GPU-a", "GPU-b", ""}, [&](const std::vector<std::string>& memories) {
    seen = memories;
    return StatusOr<std::string>(bytes + memories[1]);
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"GPU-a", "GPU-b", ""}));
  for (std::int32_t r = 0; r < 3; ++r) {
    const Outcome& o = out[static_cast<std::size_t>(r)];
    ASSERT_TRUE(o.ok) << "rank " << r << ": " << o.error;
    EXPECT_EQ(o.rendezvous.memories, (std::vector<std::string>{"GPU-a", "GPU-b", ""})) << "rank " << r;
    EXPECT_EQ(o.rendezvous.link_setup, bytes + "GPU-b") << "rank " << r;
    EXPECT_EQ(o.rendezvous.endpoints.size(), 3u);
  }
}

TEST(Bootstrap, WithoutDeviceLinksNothingExtraArrives) {
  const auto out = run_three({"", "", ""}, nullptr);
  for (std::int32_t r = 0; r < 3; ++r) {
    const Outcome& o = out[static_cast<std::size_t>(r)];
    ASSERT_TRUE(o.ok) << "rank " << r << ": " << o.error;
    EXPECT_EQ(o.rendezvous.memories, (std::vector<std::string>{"", "", ""}));
    EXPECT_TRUE(o.rendezvous.link_setup.empty());
  }
}

TEST(Bootstrap, AFailedSetupRefusesEveryRankWithItsReason) {
  const auto out = run_three({"GPU-a", "GPU-b", "GPU-c"}, [](const std::vector<std::string>&) {
    return StatusOr<std::string>(Status::Error("ncclGetUniqueId: unhandled system error"));
  });
  for (std::int32_t r = 0; r < 3; ++r) {
    const Outcome& o = out[static_cast<std::size_t>(r)];
    EXPECT_FALSE(o.ok) << "rank " << r;
    EXPECT_NE(o.error.find("device links between the ranks: ncclGetUniqueId"), std::string::npos) << o.error;
  }
}

}  // namespace
}  // namespace sy::dist
