/*
 * tests/faults/check_mode_test.cc: the check mode (TCCL_CHECK_MODE=1, stage 7).
 *
 * What it is: MPI tests, run by CTest with TCCL_CHECK_MODE=1, of the mismatches chapter 7
 * starts from -- what today hangs or returns wrong data when ranks disagree: a count, a type,
 * a root, a reduction, or the collective itself differs on one rank (the last). Each must
 * return tcclInvalidUsage on every rank, before anything runs, with a warning that names the
 * collective's sequence number and both calls. Between the cases, matching calls still run
 * and give the right sums: a mismatch leaves the communicator usable (nothing ran).
 *
 * Invariants: host buffers (the check is out of band, the same for device buffers); 2 and 3
 * ranks; each case's expectation is checked on every rank.
 *
 * NCCL counterpart: NCCL_CHECK_MODE (2.29); PyTorch: TORCH_DISTRIBUTED_DEBUG=DETAIL.
 * Added in: stage 7.
 */
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "../ring/ring_case.h"  // initWorldComm
#include "tccl.h"
#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace {

using ring::initWorldComm;

class CheckMode : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* mode = getenv("TCCL_CHECK_MODE");
    if (mode == nullptr || std::string(mode) != "1") GTEST_SKIP() << "needs TCCL_CHECK_MODE=1";
    if (worldSize() < 2) GTEST_SKIP() << "needs two ranks";
    ASSERT_EQ(initWorldComm(&comm_), tcclSuccess);
  }
  void TearDown() override {
    if (comm_) {
      EXPECT_EQ(tcclCommDestroy(comm_), tcclSuccess);
    }
  }
  /// A matching all-reduce still runs, with the right sum.
  void expectAllReduceWorks() {
    std::vector<int32_t> in(100, worldRank() + 1), out(100, 0);
    ASSERT_EQ(tcclAllReduce(in.data(), out.data(), 100, tcclInt32, tcclSum, comm_, nullptr),
              tcclSuccess);
    const int n = worldSize();
    EXPECT_EQ(out[99], n * (n + 1) / 2);
  }
  /// The last rank's call differs: every rank gets tcclInvalidUsage naming both calls.
  void expectRefused(tcclResult_t res, const std::string& mine, const std::string& theirs) {
    EXPECT_EQ(res, tcclInvalidUsage);
    const std::string why = tcclGetLastError(comm_) ? tcclGetLastError(comm_) : "";
    const int last = worldSize() - 1;
    EXPECT_NE(why.find("check mode: the ranks' calls differ at collective"), std::string::npos)
        << why;
    EXPECT_NE(why.find("rank 0 called " + mine), std::string::npos) << why;
    EXPECT_NE(why.find("rank " + std::to_string(last) + " called " + theirs), std::string::npos)
        << why;
  }
  bool odd() const { return worldRank() == worldSize() - 1; }
  tcclComm_t comm_ = nullptr;
  std::vector<float> a_ = std::vector<float>(1000, 1.0f), b_ = std::vector<float>(1000, 0.0f);
};

TEST_F(CheckMode, MatchingCallsRun) { expectAllReduceWorks(); }

TEST_F(CheckMode, CountDiffers) {
  expectAllReduceWorks();
  const size_t count = odd() ? 999 : 1000;
  expectRefused(tcclAllReduce(a_.data(), b_.data(), count, tcclFloat32, tcclSum, comm_, nullptr),
                "all_reduce of 1000 x float32 (sum)", "all_reduce of 999 x float32 (sum)");
  expectAllReduceWorks();
}

TEST_F(CheckMode, TypeDiffers) {
  const tcclDataType_t t = odd() ? tcclInt32 : tcclFloat32;
  expectRefused(tcclAllReduce(a_.data(), b_.data(), 1000, t, tcclSum, comm_, nullptr),
                "all_reduce of 1000 x float32 (sum)", "all_reduce of 1000 x int32 (sum)");
  expectAllReduceWorks();
}

TEST_F(CheckMode, RootDiffers) {
  const int root = odd() ? 1 : 0;
  expectRefused(tcclBroadcast(a_.data(), a_.data(), 1000, tcclFloat32, root, comm_, nullptr),
                "broadcast of 1000 x float32 (root 0)", "broadcast of 1000 x float32 (root 1)");
  expectAllReduceWorks();
}

TEST_F(CheckMode, ReductionDiffers) {
  const tcclRedOp_t op = odd() ? tcclMax : tcclSum;
  expectRefused(tcclAllReduce(a_.data(), b_.data(), 1000, tcclFloat32, op, comm_, nullptr),
                "all_reduce of 1000 x float32 (sum)", "all_reduce of 1000 x float32 (max)");
  expectAllReduceWorks();
}

TEST_F(CheckMode, CollectiveDiffers) {
  tcclResult_t res =
      odd() ? tcclBroadcast(a_.data(), b_.data(), 1000, tcclFloat32, 0, comm_, nullptr)
            : tcclAllReduce(a_.data(), b_.data(), 1000, tcclFloat32, tcclSum, comm_, nullptr);
  expectRefused(res, "all_reduce of 1000 x float32 (sum)", "broadcast of 1000 x float32 (root 0)");
  expectAllReduceWorks();
}

TEST_F(CheckMode, GroupOfDifferentLengths) {
  // The last rank's group has one collective more: the verdict names the first it lacks.
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  ASSERT_EQ(tcclAllReduce(a_.data(), b_.data(), 10, tcclFloat32, tcclSum, comm_, nullptr),
            tcclSuccess);
  if (odd()) {
    ASSERT_EQ(tcclAllReduce(a_.data(), b_.data(), 20, tcclFloat32, tcclSum, comm_, nullptr),
              tcclSuccess);
  }
  expectRefused(tcclGroupEnd(), "nothing", "all_reduce of 20 x float32 (sum)");
}

}  // namespace
}  // namespace test
}  // namespace tccl
