/*
 * tests/common/bootstrap_timeout_test.cc: nothing in the bootstrap waits forever.
 *
 * What it checks, with TCCL_BOOTSTRAP_TIMEOUT=2: a rank that never arrives makes the others
 * fail within a few seconds with a last error naming it; an unreachable root is named; a recv
 * that nobody answers times out.
 *
 * Runs in its own process: TCCL_BOOTSTRAP_TIMEOUT is a TCCL_PARAM, read once per process, so
 * it is set (CTest ENVIRONMENT, and below for a manual run) before anything reads it.
 *
 * NCCL counterpart: none.
 * Added in: foundation (common/).
 */
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "bootstrap_internal.h"
#include "bootstrap_test_util.h"

namespace tccl {
namespace {

using test::createAll;
using test::newUniqueId;

class BootstrapTimeout : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("TCCL_BOOTSTRAP_TIMEOUT", "2", 0);
    ASSERT_EQ(tcclParamBootstrapTimeout(), 2) << "run with TCCL_BOOTSTRAP_TIMEOUT=2";
  }
  static double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
};

TEST_F(BootstrapTimeout, MissingRankIsNamed) {
  // Ranks 0 and 1 of 3 come; rank 2 never does.
  auto id = newUniqueId();
  std::vector<test::RankResult> res(2);
  auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Bootstrap> b;
      res[r].result = Bootstrap::create(id.data(), r, 3, &b);
      res[r].lastError = lastError();
    });
  for (auto& t : threads) t.join();
  double took = since(t0);
  EXPECT_LT(took, 8.0);
  EXPECT_GE(took, 1.5);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[r].result, tcclSystemError);
    EXPECT_NE(res[r].lastError.find("rank 2 of 3 never joined"), std::string::npos)
        << "rank " << r << ": " << res[r].lastError;
  }
}

TEST_F(BootstrapTimeout, MissingRanksAreListed) {
  auto id = newUniqueId();
  std::vector<test::RankResult> res(3);
  std::vector<std::thread> threads;
  const int ranks[3] = {0, 1, 2};
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      std::unique_ptr<Bootstrap> b;
      res[i].result = Bootstrap::create(id.data(), ranks[i], 5, &b);
      res[i].lastError = lastError();
    });
  for (auto& t : threads) t.join();
  for (auto& r : res) {
    EXPECT_EQ(r.result, tcclSystemError);
    EXPECT_NE(r.lastError.find("ranks 3,4 of 5 never joined"), std::string::npos) << r.lastError;
  }
}

TEST_F(BootstrapTimeout, UnreachableRootIsNamed) {
  // An id naming a port where nobody listens (and nobody will).
  SocketAddress any, bound;
  ASSERT_EQ(SocketAddress::parse("127.0.0.1", &any), tcclSuccess);
  {
    Socket probe;
    ASSERT_EQ(probe.listen(any, &bound), tcclSuccess);
  }
  UniqueIdData d;
  d.root = bound;
  d.secret = 1;
  std::vector<char> id(kUniqueIdBytes);
  ASSERT_EQ(encodeUniqueId(d, id.data()), tcclSuccess);
  auto t0 = Clock::now();
  std::unique_ptr<Bootstrap> b;
  clearLastError();
  EXPECT_EQ(Bootstrap::create(id.data(), 1, 2, &b), tcclSystemError);
  EXPECT_LT(since(t0), 6.0);
  std::string err = lastError();
  EXPECT_NE(err.find("could not reach the bootstrap root at " + bound.toString()),
            std::string::npos)
      << err;
}

TEST_F(BootstrapTimeout, UnansweredRecvTimesOut) {
  auto id = newUniqueId();
  auto b = createAll(2, id);
  ASSERT_EQ(b.size(), 2u);
  auto t0 = Clock::now();
  char c;
  clearLastError();
  EXPECT_EQ(b[0]->recv(1, 42, &c, 1), tcclSystemError);
  double took = since(t0);
  EXPECT_GE(took, 1.5);
  EXPECT_LT(took, 6.0);
  EXPECT_NE(std::string(lastError()).find("timed out"), std::string::npos) << lastError();
}

}  // namespace
}  // namespace tccl
