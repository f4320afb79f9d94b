/*
 * tests/ring/ring_sweep_test.cc: every collective x every type x every reduction x counts x
 * in place / out of place x every root, on host (and device) buffers.
 *
 * What it is: the main correctness sweep of chapter 2. One test per (collective, type, memory
 * kind); each runs its cases (ring_case.h) in a fixed order on every rank:
 *  - Small:  counts 0, 1, nranks-1 and the prime 1021 (per rank for AllGather/ReduceScatter),
 *            every op (sum, prod, max, min, avg, premulsum variants), out of place, in place,
 *            and (at 1021) unaligned; every root for Broadcast and Reduce.
 *  - Medium: 640 KiB + 3 elements (320 KiB beyond 5 ranks), every op, out of place and in
 *            place, roots 0 and nranks-1. For AllGather and ReduceScatter the count is divided
 *            by nranks, so that every collective moves about the same number of bytes. Above
 *            the 512 KiB at which a collective takes two channels. (1 Mi elements of every
 *            type took over a minute at 3 ranks on the 2-core CI machine: the host transport
 *            sets the pace, so bytes, not elements, are the cost.)
 *  - AgreeWithHarness: the table-based reference used at medium counts equals the harness's
 *            referenceReduce where both apply (no communication).
 * Run with TCCL_BUFFSIZE set small (ring_tests.cmake does, at 3 ranks), the medium counts
 * also go through many ring loops and the uneven last loop.
 *
 * Invariants: every rank builds the same case list and runs it in the same order; after each
 * case the ranks agree whether every tccl call succeeded, and stop together if not (their calls
 * would no longer match). Failures are collected and reported per test (first 8 in full).
 *
 * NCCL counterpart: nccl-tests (all_reduce_perf -c 1 over -d all -o all) in spirit.
 * Added in: stage 2.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "ring_case.h"

namespace tccl {
namespace test {
namespace ring {
namespace {

constexpr size_t kPrime = 1021;
constexpr int kSeed = 7;

/// The medium size: a number of bytes, so that float64 cases cost what int8 cases cost (the
/// host transport, not the element count, sets the run time), plus 3 elements so that no
/// count is a multiple of a 16-byte pack. 640 KiB is above the 512 KiB at which a collective
/// uses two channels (plan_ring.cc), so every type runs on two rings with uneven shares; with
/// the default FIFO a channel's share fits one step, and the 64 KiB-FIFO run (ring_tests.cmake)
/// takes the same counts through many steps and ring loops. Beyond 5 ranks (oversubscribed on
/// the 2-core CI machine) half of it.
size_t mediumBytes(int nranks) { return nranks <= 5 ? 640 << 10 : 320 << 10; }
size_t mediumCount(int nranks, DType t) { return mediumBytes(nranks) / dtypeSize(t) + 3; }
/// The per-rank count of AllGather / ReduceScatter at the medium size (odd, so blocks are
/// never 16-byte multiples in the narrow types).
size_t mediumPerRank(int nranks, DType t) { return mediumCount(nranks, t) / size_t(nranks) | 1; }

/// One table per signedness, shared by every test of the program (building it costs ~60 ns
/// per element and rank). Its period covers every index a sweep case reads.
const Inputs& sweepInputs(DType t) {
  static std::map<bool, std::unique_ptr<Inputs>> cache;
  const bool sgn = isSignedType(t);
  auto& slot = cache[sgn];
  if (!slot) {
    const int n = worldSize();
    // Every index a case reads: the narrowest type has the most elements.
    const size_t period =
        std::max({mediumCount(n, DType::kInt8), size_t(n) * mediumPerRank(n, DType::kInt8),
                  size_t(n) * kPrime});
    slot = std::make_unique<Inputs>(n, sgn, kSeed, period);
  }
  return *slot;
}

struct Param {
  Coll coll;
  DType type;
  MemKind kind;
};
std::string paramName(const Param& p) {
  return std::string(collName(p.coll)) + "_" + dtypeName(p.type) + "_" + memKindName(p.kind);
}
// How GoogleTest prints a failed test's parameter.
void PrintTo(const Param& p, std::ostream* os) { *os << paramName(p); }
std::vector<Param> allParams() {
  std::vector<Param> out;
  for (Coll c : allColls()) {
    for (DType t : allDTypes()) {
      for (MemKind k : memKinds()) out.push_back(Param{c, t, k});
    }
  }
  return out;
}

class SweepTest : public ::testing::TestWithParam<Param> {
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

  std::vector<OpSpec> ops() const {
    const auto [coll, type, kind] = GetParam();
    if (!hasOp(coll)) return {builtinOp(RedOp::kSum)};  // not used by the call
    return opsFor(type, haveGpu());
  }

  /// Runs the cases in order; stops every rank together after a failed tccl call.
  void run(const std::vector<Case>& cases) {
    const Inputs& in = sweepInputs(GetParam().type);
    int failures = 0;
    std::string report;
    for (const Case& c : cases) {
      CaseResult r = runCase(comm_, in, c);
      if (!r.ok && failures++ < 8) report += "\n  " + r.why;
      if (!allRanksOk(r.callOk)) {
        ADD_FAILURE() << "a tccl call failed on some rank during [" << c.describe()
                      << "]; the remaining cases were not run";
        break;
      }
    }
    EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " cases failed on rank "
                           << worldRank() << ":" << report;
  }

  static tcclComm_t comm_;
  static tcclResult_t initResult_;
};
tcclComm_t SweepTest::comm_ = nullptr;
tcclResult_t SweepTest::initResult_ = tcclSuccess;

TEST_P(SweepTest, Small) {
  const auto [coll, type, kind] = GetParam();
  const int n = worldSize();
  std::vector<size_t> counts = {0, 1};
  if (size_t(n - 1) > 1) counts.push_back(size_t(n - 1));
  counts.push_back(kPrime);
  std::vector<Case> cases;
  for (const OpSpec& op : ops()) {
    for (size_t count : counts) {
      for (Place place : {Place::kOutOfPlace, Place::kInPlace, Place::kUnaligned}) {
        if (place == Place::kUnaligned && count != kPrime) continue;
        for (int root = 0; root < (hasRoot(coll) ? n : 1); root++) {
          cases.push_back(Case{coll, type, op, count, place, root, kind});
        }
      }
    }
  }
  run(cases);
}

TEST_P(SweepTest, Medium) {
  const auto [coll, type, kind] = GetParam();
  const int n = worldSize();
  const size_t count = (coll == Coll::kAllGather || coll == Coll::kReduceScatter)
                           ? mediumPerRank(n, type)
                           : mediumCount(n, type);
  std::vector<int> roots = {0};
  if (hasRoot(coll) && n > 1) roots.push_back(n - 1);
  std::vector<Case> cases;
  for (const OpSpec& op : ops()) {
    for (Place place : {Place::kOutOfPlace, Place::kInPlace}) {
      for (int root : roots) cases.push_back(Case{coll, type, op, count, place, root, kind});
    }
  }
  run(cases);
}

INSTANTIATE_TEST_SUITE_P(Ring, SweepTest, ::testing::ValuesIn(allParams()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return paramName(info.param);
                         });

// The medium counts trust Inputs::reduceModel and Inputs::fill; they must agree with the
// harness's referenceReduce and fillInput wherever both can be computed.
TEST(RingReferences, AgreeWithHarness) {
  const int n = worldSize();
  const size_t count = 2 * kPrime;
  for (DType t : allDTypes()) {
    const Inputs in(n, isSignedType(t), kSeed + 1, count);
    std::vector<char> mine(count * dtypeSize(t)), theirs(count * dtypeSize(t));
    in.fill(mine.data(), t, n - 1, 0, count);
    fillInput(theirs.data(), count, t, n - 1, kSeed + 1);
    EXPECT_EQ(mine, theirs) << "fill of " << dtypeName(t);
    for (RedOp op : allRedOps()) {
      in.reduceModel(mine.data(), t, builtinOp(op), kPrime, kPrime);
      referenceReduce(theirs.data(), kPrime, t, op, n, kSeed + 1, kPrime);
      std::string why;
      // Float avg: the model pre-multiplies by a rounded 1/n, the harness divides the exact
      // sum; the harness's tolerance bounds the difference. Everything else is exact.
      const double tol = op == RedOp::kAvg ? tolerance(t, op, n) : 0.0;
      EXPECT_TRUE(compare(mine.data(), theirs.data(), kPrime, t, tol, &why))
          << dtypeName(t) << " " << redOpName(op) << ": " << why;
    }
  }
}

}  // namespace
}  // namespace ring
}  // namespace test
}  // namespace tccl
