/*
 * tests/p2p/p2p_patterns_test.cc: every P2P pattern x every data type x counts 0, 1, 7 and
 * 1Mi+3, host and (with a GPU) device buffers, every root for gather and scatter.
 *
 * What it is: the sweep that says the stage-1 patterns move the right bytes to the right place
 * and nothing else. Runs under mpirun at 1..5 ranks (tests/p2p/p2p_tests.cmake); one
 * communicator over MPI_COMM_WORLD serves the whole suite.
 *
 * Invariants: every rank runs the same parameter list in the same order (gtest orders tests
 * deterministically), and every test ends with an all-rank agreement on the outcome, so the
 * ranks stay in step even when one of them fails.
 * The 1Mi+3 case runs for the smallest and the largest element (int8: an odd byte count; int64)
 * and one root, unless TCCL_TEST_ALL_TYPES=1: p2p moves bytes, so the type changes only the
 * byte count and the argument checks, which the small counts cover for all ten types and every
 * root. (Filling and checking 1Mi elements costs more CPU than moving them: the 2-core CI
 * machine runs np 5 oversubscribed.)
 *
 * NCCL counterpart: nccl-tests sendrecv/alltoall/gather/scatter perf tests run with -c 1.
 * Added in: stage 1.
 */
#include "p2p_patterns.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

namespace tccl {
namespace test {
namespace p2p {
namespace {

constexpr size_t kBigCount = (1u << 20) + 3;

class PatternTest : public ::testing::TestWithParam<std::tuple<Pattern, DType, size_t, MemKind>> {
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
tcclComm_t PatternTest::comm_ = nullptr;
tcclResult_t PatternTest::initResult_ = tcclSuccess;

TEST_P(PatternTest, MovesExactBytes) {
  const auto [pattern, type, count, kind] = GetParam();
  const int n = worldSize();
  // Every root at the small counts; the last rank (not rank 0 once n > 1) at the big count.
  std::vector<int> roots{0};
  if (isRooted(pattern)) {
    roots.clear();
    for (int r = 0; r < n; r++)
      if (count < kBigCount || r == n - 1) roots.push_back(r);
  }
  for (int root : roots) {
    std::string why;
    bool ok = runPattern(comm_, pattern, type, count, kind, root, /*seed=*/17 + root, &why);
    EXPECT_TRUE(ok) << "root " << root << ": " << why;
    bool all = allRanksOk(ok);
    if (ok) {
      EXPECT_TRUE(all) << "root " << root << ": another rank failed (see its output)";
    }
    if (!all) return;
  }
}

std::vector<DType> bigTypes() {
  const char* all = std::getenv("TCCL_TEST_ALL_TYPES");
  if (all != nullptr && std::string(all) == "1") return allDTypes();
  return {DType::kInt8, DType::kInt64};
}

std::string paramName(
    const ::testing::TestParamInfo<std::tuple<Pattern, DType, size_t, MemKind>>& info) {
  const auto [pattern, type, count, kind] = info.param;
  return std::string(patternName(pattern)) + "_" + dtypeName(type) + "_n" + std::to_string(count) +
         "_" + memKindName(kind);
}

INSTANTIATE_TEST_SUITE_P(Small, PatternTest,
                         ::testing::Combine(::testing::ValuesIn(allPatterns()),
                                            ::testing::ValuesIn(allDTypes()),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{7}),
                                            ::testing::ValuesIn(memKinds())),
                         paramName);

INSTANTIATE_TEST_SUITE_P(Big, PatternTest,
                         ::testing::Combine(::testing::ValuesIn(allPatterns()),
                                            ::testing::ValuesIn(bigTypes()),
                                            ::testing::Values(kBigCount),
                                            ::testing::ValuesIn(memKinds())),
                         paramName);

}  // namespace
}  // namespace p2p
}  // namespace test
}  // namespace tccl
