/*
 * tests/p2p/p2p_large_test.cc: one 64 Mi-element case per P2P pattern.
 *
 * What it is: the big-message check. 64 Mi one-byte elements per block (so alltoall moves
 * nranks x 64 MiB per rank) is far larger than any FIFO, step or chunk size, so it exercises
 * the pipelining, wrap-around of the FIFO slots and byte counts past 2^26. int8 and uint8
 * alternate between patterns to keep memory and time sane; registered at 2 and 4 ranks only.
 *
 * Invariants: as p2p_patterns_test.cc (same runPattern body, same all-rank agreement).
 *
 * NCCL counterpart: nccl-tests run with -e 64M -c 1.
 * Added in: stage 1.
 */
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "p2p_patterns.h"

namespace tccl {
namespace test {
namespace p2p {
namespace {

constexpr size_t kLargeCount = size_t{64} << 20;

class LargeTest : public ::testing::TestWithParam<std::tuple<Pattern, MemKind>> {
 protected:
  static void SetUpTestSuite() { initResult_ = initWorldComm(&comm_); }
  static void TearDownTestSuite() {
    if (comm_ != nullptr) {
      EXPECT_EQ(tcclCommDestroy(comm_), tcclSuccess);
    }
    comm_ = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(initResult_, tcclSuccess)
        << "communicator creation failed: " << tcclGetLastError(nullptr);
  }
  static tcclComm_t comm_;
  static tcclResult_t initResult_;
};
tcclComm_t LargeTest::comm_ = nullptr;
tcclResult_t LargeTest::initResult_ = tcclSuccess;

TEST_P(LargeTest, SixtyFourMiElements) {
  const auto [pattern, kind] = GetParam();
  // Alternate the two byte types so both are covered without doubling the run time.
  const DType type = static_cast<int>(pattern) % 2 == 0 ? DType::kInt8 : DType::kUint8;
  // The last rank as gather root, rank 0 as scatter root: neither is always "rank 0".
  const int root = pattern == Pattern::kGather ? worldSize() - 1 : 0;
  std::string why;
  bool ok = runPattern(comm_, pattern, type, kLargeCount, kind, root, /*seed=*/5, &why);
  EXPECT_TRUE(ok) << why;
  bool all = allRanksOk(ok);
  if (ok) {
    EXPECT_TRUE(all) << "another rank failed (see its output)";
  }
}

INSTANTIATE_TEST_SUITE_P(AllPatterns, LargeTest,
                         ::testing::Combine(::testing::ValuesIn(allPatterns()),
                                            ::testing::ValuesIn(memKinds())),
                         [](const ::testing::TestParamInfo<std::tuple<Pattern, MemKind>>& info) {
                           return std::string(patternName(std::get<0>(info.param))) + "_" +
                                  memKindName(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace p2p
}  // namespace test
}  // namespace tccl
