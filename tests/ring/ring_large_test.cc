/*
 * tests/ring/ring_large_test.cc: one 64 Mi-element case set per collective.
 *
 * What it is: the big-message check. 64 Mi elements is far more than a FIFO (4 MiB), a ring
 * chunk or a channel's share, so it exercises many loops of the ring per channel, the uneven
 * last loop, step counters past many wrap-arounds of the FIFO slots, and byte offsets past
 * 2^26. One type and op per collective keeps memory and time sane (registered at 2 and 4 ranks
 * only):
 *   AllReduce      float32 sum                  (256 MiB per buffer)
 *   AllGather      int8, 64 Mi per rank         (nranks x 64 MiB received)
 *   ReduceScatter  uint8 sum, 64 Mi per rank    (nranks x 64 MiB sent)
 *   Broadcast      float16, roots 0 and n-1     (128 MiB)
 *   Reduce         bfloat16 premulsum by -1.5 (exact), roots 0 and n-1   (128 MiB)
 * each out of place and in place, with the same checks as the sweep (ring_case.h).
 *
 * Inputs: the harness's values repeated with a period of 65521 elements (a prime, see
 * ring_inputs.h): computing them is ~60 ns per element and rank, which at 64 Mi elements x 4
 * ranks would take longer than the collectives themselves.
 *
 * Invariants: as the sweep: every rank runs the same cases in the same order and stops with the
 * others after a failed call.
 *
 * NCCL counterpart: nccl-tests run with -b 64M -e 64M -c 1.
 * Added in: stage 2.
 */
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "ring_case.h"

namespace tccl {
namespace test {
namespace ring {
namespace {

constexpr size_t kLargeCount = size_t{64} << 20;
constexpr size_t kPeriod = 65521;

struct LargeSpec {
  DType type;
  OpSpec op;
};

LargeSpec specFor(Coll c) {
  switch (c) {
    case Coll::kAllReduce:
      return {DType::kFloat32, builtinOp(RedOp::kSum)};
    case Coll::kAllGather:
      return {DType::kInt8, builtinOp(RedOp::kSum)};
    case Coll::kReduceScatter:
      return {DType::kUint8, builtinOp(RedOp::kSum)};
    case Coll::kBroadcast:
      return {DType::kFloat16, builtinOp(RedOp::kSum)};
    case Coll::kReduce:
      break;
  }
  return {DType::kBfloat16, preMulHostExact(DType::kBfloat16)};
}

struct Param {
  Coll coll;
  MemKind kind;
};
std::string paramName(const Param& p) {
  return std::string(collName(p.coll)) + "_" + memKindName(p.kind);
}
// How GoogleTest prints a failed test's parameter.
void PrintTo(const Param& p, std::ostream* os) { *os << paramName(p); }
std::vector<Param> allParams() {
  std::vector<Param> out;
  for (Coll c : allColls()) {
    for (MemKind k : memKinds()) out.push_back(Param{c, k});
  }
  return out;
}

class LargeTest : public ::testing::TestWithParam<Param> {
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
  const auto [coll, kind] = GetParam();
  const LargeSpec spec = specFor(coll);
  const int n = worldSize();
  const Inputs in(n, isSignedType(spec.type), /*seed=*/11, kPeriod);
  std::vector<int> roots = {0};
  if (hasRoot(coll) && n > 1) roots.push_back(n - 1);
  int failures = 0;
  std::string report;
  for (Place place : {Place::kOutOfPlace, Place::kInPlace}) {
    for (int root : roots) {
      const Case c{coll, spec.type, spec.op, kLargeCount, place, root, kind};
      CaseResult r = runCase(comm_, in, c);
      if (!r.ok && failures++ < 4) report += "\n  " + r.why;
      if (!allRanksOk(r.callOk)) {
        ADD_FAILURE() << "a tccl call failed on some rank during [" << c.describe() << "]";
        return;
      }
    }
  }
  EXPECT_EQ(failures, 0) << "on rank " << worldRank() << ":" << report;
}

INSTANTIATE_TEST_SUITE_P(Ring, LargeTest, ::testing::ValuesIn(allParams()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return paramName(info.param);
                         });

}  // namespace
}  // namespace ring
}  // namespace test
}  // namespace tccl
