/*
 * tests/harness/test_harness_mpi.cc: the multi-rank behaviour of the harness (mpi_main.cc and
 * the MPI helpers), run under mpirun at 1..4 ranks.
 *
 * What it is: checks that the MPI helpers agree across ranks, that every process computes the
 * same fillInput for every rank (so references need no communication), and, through DISABLED_
 * tests that fail on purpose, the failure paths of mpi_main.cc:
 *  - HarnessFailurePaths.DISABLED_RankOneFails: only rank 1 (rank 0 when alone) fails; every
 *    rank must then report the test as failed and exit nonzero;
 *  - HarnessFailurePaths.DISABLED_RankZeroHangs: rank 0 sleeps; with TCCL_TEST_TIMEOUT set,
 *    every rank must print "TIMEOUT: test ... on rank r" and exit 124.
 * They run through CTest as harness_failure / harness_timeout (tests/harness/CMakeLists.txt),
 * which check every rank's exit code.
 *
 * Invariants: every rank makes the same MPI calls in every test.
 *
 * NCCL counterpart: none.
 * Added in: foundation (tests/).
 */
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace {

TEST(HarnessMpiTest, RanksAndSizes) {
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(worldRank(), rank);
  EXPECT_EQ(worldSize(), size);
  EXPECT_GE(localRank(), 0);
  EXPECT_LE(localRank(), worldRank());  // one node here: local rank == world rank
  EXPECT_TRUE(allRanksOk(true));
}

TEST(HarnessMpiTest, BcastFromEveryRoot) {
  for (int root = 0; root < worldSize(); root++) {
    std::vector<int32_t> data(1000, -1);
    if (worldRank() == root) fillInput(data.data(), data.size(), DType::kInt32, root, 4);
    bcast(data.data(), data.size() * sizeof(int32_t), root);
    std::vector<int32_t> want(1000);
    fillInput(want.data(), want.size(), DType::kInt32, root, 4);
    EXPECT_EQ(data, want) << "root " << root;
  }
  barrier();
}

TEST(HarnessMpiTest, AllRanksOkIsAnAnd) {
  EXPECT_FALSE(allRanksOk(worldRank() != worldSize() - 1));
  EXPECT_FALSE(allRanksOk(false));
  EXPECT_TRUE(allRanksOk(true));
}

// Each process fills only its own rank's input; MPI's reduction of those must equal the
// reference every process computes alone.
TEST(HarnessMpiTest, ReferenceMatchesMpiReduction) {
  const size_t n = 4096;
  struct Case {
    RedOp op;
    MPI_Op mpi;
  };
  for (Case c : {Case{RedOp::kSum, MPI_SUM}, Case{RedOp::kProd, MPI_PROD},
                 Case{RedOp::kMax, MPI_MAX}, Case{RedOp::kMin, MPI_MIN}}) {
    for (DType t : {DType::kInt64, DType::kFloat64}) {
      std::vector<char> mine(n * 8), got(n * 8), want(n * 8);
      fillInput(mine.data(), n, t, worldRank(), 21);
      MPI_Allreduce(mine.data(), got.data(), static_cast<int>(n),
                    t == DType::kInt64 ? MPI_INT64_T : MPI_DOUBLE, c.mpi, MPI_COMM_WORLD);
      referenceReduce(want.data(), n, t, c.op, worldSize(), 21);
      std::string why;
      EXPECT_TRUE(compare(got.data(), want.data(), n, t, 0, &why))
          << dtypeName(t) << " " << redOpName(c.op) << ": " << why;
    }
  }
}

TEST(HarnessFailurePaths, DISABLED_RankOneFails) {
  const int failing = worldSize() > 1 ? 1 : 0;
  EXPECT_NE(worldRank(), failing) << "rank " << worldRank() << " fails on purpose";
}

TEST(HarnessFailurePaths, DISABLED_RankZeroHangs) {
  if (worldRank() == 0) std::this_thread::sleep_for(std::chrono::hours(1));
  // The other ranks go on to the end-of-test agreement and wait there for rank 0.
}

}  // namespace
}  // namespace test
}  // namespace tccl
