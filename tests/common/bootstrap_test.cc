/*
 * tests/common/bootstrap_test.cc: the bootstrap with ranks as threads of one process.
 *
 * What it checks, for 1..5 and 8 ranks: all-gather fills every slot (also with slots far
 * larger than the socket buffers, which deadlocks a bootstrap that does not keep receiving),
 * tagged send/recv between every pair with tags received in another order than sent and
 * FIFO order within a tag, the barrier (no rank leaves before all entered), and the other
 * ways in: IPv6 loopback, TCCL_COMM_ID, the torchrun environment, two communicators at once.
 *
 * NCCL counterpart: none (gloo's tests run ranks as threads the same way).
 * Added in: foundation (common/).
 */
#include "tccl/common/bootstrap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap_test_util.h"
#include "tccl/common/socket.h"

namespace tccl {
namespace {

using test::newUniqueId;
using test::RankResult;
using test::runRanks;
using test::ScopedEnv;

void expectAllOk(const std::vector<RankResult>& results) {
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r].result, tcclSuccess) << "rank " << r << ": " << results[r].lastError;
}

uint32_t pattern(int rank, size_t i, int round) {
  return static_cast<uint32_t>(rank * 1000003 + i * 7 + round * 101);
}

// An all-gather of `words` 32-bit values per rank, `rounds` times, checked everywhere.
bool allGatherCheck(int rank, Bootstrap& b, size_t words, int rounds) {
  int n = b.nranks();
  for (int round = 0; round < rounds; ++round) {
    std::vector<uint32_t> buf(words * n, 0xdeadbeef);
    for (size_t i = 0; i < words; ++i) buf[rank * words + i] = pattern(rank, i, round);
    if (b.allGather(buf.data(), words * sizeof(uint32_t)) != tcclSuccess) return false;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < words; ++i)
        if (buf[r * words + i] != pattern(r, i, round)) {
          ADD_FAILURE() << "rank " << rank << " slot " << r << " word " << i;
          return false;
        }
  }
  return true;
}

class BootstrapSweep : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapSweep, Creates) {
  int n = GetParam();
  auto id = newUniqueId();
  ASSERT_FALSE(id.empty());
  expectAllOk(runRanks(n, id, [n](int rank, Bootstrap& b) {
    EXPECT_EQ(b.rank(), rank);
    EXPECT_EQ(b.nranks(), n);
    EXPECT_TRUE(b.localAddress().valid());
    return b.secret() != 0;
  }));
}

TEST_P(BootstrapSweep, AllGather) {
  int n = GetParam();
  auto id = newUniqueId();
  expectAllOk(runRanks(n, id, [](int rank, Bootstrap& b) {
    return allGatherCheck(rank, b, 1, 3) && allGatherCheck(rank, b, 333, 2) &&
           allGatherCheck(rank, b, 0, 1);
  }));
}

TEST_P(BootstrapSweep, SendRecvAllPairsOutOfOrderTags) {
  int n = GetParam();
  auto id = newUniqueId();
  constexpr uint32_t kTags = 4;
  const uint32_t sendOrder[kTags] = {3, 1, 0, 2};
  auto payload = [](int from, int to, uint32_t tag, int seq) {
    return std::to_string(from) + "->" + std::to_string(to) + " tag " + std::to_string(tag) + " #" +
           std::to_string(seq);
  };
  expectAllOk(runRanks(n, id, [&](int rank, Bootstrap& b) {
    // Two messages per (peer, tag): the second must come second.
    for (int peer = 0; peer < n; ++peer)
      for (uint32_t tag : sendOrder)
        for (int seq = 0; seq < 2; ++seq) {
          std::string m = payload(rank, peer, tag, seq);
          m.resize(64);
          if (b.send(peer, tag, m.data(), m.size()) != tcclSuccess) return false;
        }
    for (int step = 0; step < n; ++step) {
      int peer = (rank + n - step) % n;  // every rank receives from its peers in its own order
      for (uint32_t tag = 0; tag < kTags; ++tag)
        for (int seq = 0; seq < 2; ++seq) {
          std::string m(64, '\0');
          if (b.recv(peer, tag, &m[0], m.size()) != tcclSuccess) return false;
          std::string want = payload(peer, rank, tag, seq);
          want.resize(64);
          EXPECT_EQ(m, want);
        }
    }
    return true;
  }));
}

TEST_P(BootstrapSweep, Barrier) {
  int n = GetParam();
  auto id = newUniqueId();
  constexpr int kRounds = 5;
  std::vector<std::atomic<int>> entered(kRounds);
  for (auto& e : entered) e = 0;
  expectAllOk(runRanks(n, id, [&](int rank, Bootstrap& b) {
    for (int round = 0; round < kRounds; ++round) {
      // Stagger arrivals so a barrier that lets ranks through early is caught.
      if (rank == round % n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      entered[round]++;
      if (b.barrier(round % 2) != tcclSuccess) return false;
      EXPECT_EQ(entered[round].load(), n)
          << "rank " << rank << " left barrier " << round << " early";
    }
    return true;
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapSweep, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "n" + std::to_string(i.param);
                         });

// Slots bigger than what the kernel buffers: every rank sends before it receives, so this
// only finishes if receiving goes on while a rank is blocked sending.
TEST(Bootstrap, LargeAllGatherAndCrossingSends) {
  auto id = newUniqueId();
  constexpr size_t kWords = 4 << 20;  // 16 MiB per rank
  expectAllOk(runRanks(3, id, [](int rank, Bootstrap& b) {
    if (!allGatherCheck(rank, b, kWords, 1)) return false;
    std::vector<char> out(8 << 20, static_cast<char>(rank)), in(8 << 20);
    for (int peer = 0; peer < 3; ++peer)
      if (peer != rank && b.send(peer, 9, out.data(), out.size()) != tcclSuccess) return false;
    for (int peer = 0; peer < 3; ++peer) {
      if (peer == rank) continue;
      if (b.recv(peer, 9, in.data(), in.size()) != tcclSuccess) return false;
      EXPECT_EQ(in, std::vector<char>(8 << 20, static_cast<char>(peer)));
    }
    return true;
  }));
}

TEST(Bootstrap, SendToSelf) {
  auto id = newUniqueId();
  expectAllOk(runRanks(2, id, [](int rank, Bootstrap& b) {
    int v = 40 + rank, got = 0;
    if (b.send(rank, 1, &v, sizeof(v)) != tcclSuccess) return false;
    if (b.recv(rank, 1, &got, sizeof(got)) != tcclSuccess) return false;
    return got == v;
  }));
}

TEST(Bootstrap, TwoCommunicatorsAtOnce) {
  auto idA = newUniqueId(), idB = newUniqueId();
  std::vector<RankResult> a, b;
  std::thread ta([&] {
    a = runRanks(3, idA, [](int r, Bootstrap& bs) { return allGatherCheck(r, bs, 16, 3); });
  });
  std::thread tb([&] {
    b = runRanks(4, idB, [](int r, Bootstrap& bs) { return allGatherCheck(r, bs, 16, 3); });
  });
  ta.join();
  tb.join();
  expectAllOk(a);
  expectAllOk(b);
}

TEST(Bootstrap, Ipv6Loopback) {
  ScopedEnv fam("TCCL_SOCKET_FAMILY", "AF_INET6");
  ScopedEnv ifname("TCCL_SOCKET_IFNAME", "lo");
  auto id = newUniqueId();
  ASSERT_FALSE(id.empty());
  UniqueIdData d;
  ASSERT_EQ(decodeUniqueId(id.data(), &d), tcclSuccess);
  EXPECT_EQ(d.root.family(), AF_INET6);
  expectAllOk(runRanks(3, id, [](int rank, Bootstrap& b) {
    EXPECT_EQ(b.localAddress().toString(), "[::1]:0");
    return allGatherCheck(rank, b, 8, 2) && b.barrier() == tcclSuccess;
  }));
}

int freePort() {
  SocketAddress any, bound;
  SocketAddress::parse("0.0.0.0", &any);  // as the root binds: every interface
  Socket probe;
  if (probe.listen(any, &bound) != tcclSuccess) return 0;
  return bound.port();
}

TEST(Bootstrap, CommIdPath) {
  int port = freePort();
  ASSERT_NE(port, 0);
  std::vector<char> id(kUniqueIdBytes);
  {
    ScopedEnv comm("TCCL_COMM_ID", "127.0.0.1:" + std::to_string(port));
    ASSERT_EQ(bootstrapGetUniqueId(id.data()), tcclSuccess);
  }
  // Rank 0 starts the root at that port inside create; the others may come first and wait.
  expectAllOk(
      runRanks(4, id, [](int rank, Bootstrap& b) { return allGatherCheck(rank, b, 4, 1); }));
  // The port is free again afterwards: a second job on the same TCCL_COMM_ID works.
  expectAllOk(runRanks(2, id, [](int rank, Bootstrap& b) { return b.barrier() == tcclSuccess; }));
}

TEST(Bootstrap, TorchrunEnvironmentPath) {
  constexpr int n = 3;
  int port = freePort();
  ASSERT_NE(port, 0);
  std::vector<std::vector<char>> ids(n, std::vector<char>(kUniqueIdBytes));
  {
    ScopedEnv addr("MASTER_ADDR", "localhost");
    ScopedEnv p("MASTER_PORT", std::to_string(port));
    ScopedEnv size("WORLD_SIZE", std::to_string(n));
    for (int r = 0; r < n; ++r) {
      ScopedEnv rank("RANK", std::to_string(r));
      int gotRank = -1, gotSize = -1;
      ASSERT_EQ(bootstrapIdFromEnv(ids[r].data(), &gotRank, &gotSize), tcclSuccess);
      EXPECT_EQ(gotRank, r);
      EXPECT_EQ(gotSize, n);
    }
  }
  expectAllOk(
      runRanks(n, ids, [](int rank, Bootstrap& b) { return allGatherCheck(rank, b, 4, 2); }));
}

TEST(Bootstrap, RejectsBadArguments) {
  auto id = newUniqueId();
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::create(id.data(), 2, 2, &b), tcclInvalidArgument);
  EXPECT_EQ(Bootstrap::create(id.data(), -1, 2, &b), tcclInvalidArgument);
  EXPECT_EQ(Bootstrap::create(id.data(), 0, 0, &b), tcclInvalidArgument);
  EXPECT_EQ(Bootstrap::create(nullptr, 0, 1, &b), tcclInvalidArgument);
  std::vector<char> garbage(kUniqueIdBytes, 'x');
  EXPECT_EQ(Bootstrap::create(garbage.data(), 0, 1, &b), tcclInvalidArgument);
  EXPECT_EQ(b, nullptr);
  // The id is still good for a real communicator.
  expectAllOk(runRanks(2, id, [](int, Bootstrap& bs) {
    char c = 0;
    EXPECT_EQ(bs.send(2, 0, &c, 1), tcclInvalidArgument);
    EXPECT_EQ(bs.recv(-1, 0, &c, 1), tcclInvalidArgument);
    EXPECT_EQ(bs.send(0, 0, nullptr, 1), tcclInvalidArgument);
    return true;
  }));
}

}  // namespace
}  // namespace tccl
