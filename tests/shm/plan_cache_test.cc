/*
 * tests/shm/plan_cache_test.cc: the kept plan of the last host collective (stage 5,
 * plan_cache.cc) is reused only for a call of the same shape, and then with that call's own
 * buffers.
 *
 * What it is: sequences of calls built to catch a plan reused wrongly:
 *  - the same shape over and over, each call with new buffers and new input (two input
 *    tables, alternating): a reused plan that kept the last call's buffers leaves this call's
 *    output poisoned, or computes the last call's input;
 *  - in place after out of place (and back), same count: one kept plan serves both (the
 *    algorithms compare the pointers when they run), and each must come out right;
 *  - the same count and type with another op, another premulsum scalar (a destroyed op's
 *    handle is given to the next op created, so the handle alone says nothing), another type
 *    of the same size, another root;
 *  - the kept shape between a group of two collectives and a send/recv pair, which are planned
 *    afresh and must not disturb it.
 * Each call is checked in full by ring_case.h (result, guards, input untouched).
 *
 * Invariants: every rank issues the same calls in the same order; each call's verdict is
 * agreed (allRanksOk) before the next, so a failure on one rank never leaves another waiting.
 * Host buffers only: only host plans are kept (device calls take the planner each time).
 *
 * NCCL counterpart: none (NCCL keeps no plan between eager calls).
 * Added in: stage 5.
 */
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ring_case.h"  // (tests/ring)

namespace tccl {
namespace test {
namespace ring {
namespace {

class PlanCache : public ::testing::Test {
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
    n_ = worldSize();
  }

  /// Two input tables per signedness (seeds 1 and 2): consecutive calls see different data.
  static const Inputs& inputs(DType t, int which) {
    static std::unique_ptr<Inputs> tables[2][2];
    auto& slot = tables[isSignedType(t)][which & 1];
    if (!slot) slot = std::make_unique<Inputs>(worldSize(), isSignedType(t), 1 + (which & 1), 4096);
    return *slot;
  }

  /// Issues one call alone (a group of one: what the cache keeps) and checks it.
  void run(const Case& c, int which) {
    CaseRun r(comm_, inputs(c.type, which), c);
    r.issue();
    CaseResult res = r.check();
    ASSERT_TRUE(allRanksOk(res.callOk)) << "a call failed on some rank: " << res.why;
    EXPECT_TRUE(res.ok) << "call " << which << ": " << res.why;
  }

  static Case make(Coll coll, DType t, OpSpec op, size_t count, Place place, int root = 0) {
    return Case{coll, t, op, count, place, root, MemKind::kHost};
  }

  static tcclComm_t comm_;
  static tcclResult_t initResult_;
  int n_ = 0;
};

tcclComm_t PlanCache::comm_ = nullptr;
tcclResult_t PlanCache::initResult_ = tcclInternalError;

const Coll kColls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter,
                       Coll::kBroadcast, Coll::kReduce};

TEST_F(PlanCache, SameShapeNewBuffersAndInputEachCall) {
  for (Coll coll : kColls) {
    for (size_t count : {size_t(1), size_t(n_ + 1), size_t(1000)}) {
      for (int call = 0; call < 4; call++) {
        run(make(coll, DType::kFloat32, builtinOp(RedOp::kSum), count, Place::kOutOfPlace,
                 n_ - 1),
            call);
      }
    }
  }
}

TEST_F(PlanCache, InPlaceAndOutOfPlaceInTurn) {
  for (Coll coll : kColls) {
    for (Place place : {Place::kOutOfPlace, Place::kInPlace, Place::kUnaligned, Place::kInPlace,
                        Place::kOutOfPlace}) {
      run(make(coll, DType::kInt32, builtinOp(RedOp::kSum), 257, place), int(place));
    }
  }
}

TEST_F(PlanCache, OpScalarTypeAndRootChangesArePlannedAfresh) {
  // Same collective and count; only the op changes (premulsum: only its scalar).
  const OpSpec by2 = preMulOp(OpSpec::Kind::kPreMulHost, 2, true, "premulsum(2)");
  const OpSpec by3 = preMulOp(OpSpec::Kind::kPreMulHost, 3, true, "premulsum(3)");
  const OpSpec ops[] = {builtinOp(RedOp::kSum), builtinOp(RedOp::kMax), builtinOp(RedOp::kProd),
                        by2, by3, by2, builtinOp(RedOp::kAvg), builtinOp(RedOp::kSum)};
  int call = 0;
  for (const OpSpec& op : ops) {
    run(make(Coll::kAllReduce, DType::kFloat32, op, 300, Place::kOutOfPlace), call++);
  }
  // Same byte size, another type (float32 and int32 and uint32 elements are all 4 bytes).
  for (DType t : {DType::kFloat32, DType::kInt32, DType::kUint32, DType::kFloat32}) {
    run(make(Coll::kAllReduce, t, builtinOp(RedOp::kMax), 300, Place::kOutOfPlace), call++);
  }
  // Every root in turn, then back to the first.
  for (Coll coll : {Coll::kBroadcast, Coll::kReduce}) {
    for (int root = 0; root <= n_; root++) {
      run(make(coll, DType::kFloat64, builtinOp(RedOp::kSum), 33, Place::kOutOfPlace,
               root % n_),
          call++);
    }
  }
}

TEST_F(PlanCache, KeptShapeAroundGroupsAndSendRecv) {
  const Case kept = make(Coll::kAllReduce, DType::kFloat32, builtinOp(RedOp::kSum), 64,
                         Place::kOutOfPlace);
  run(kept, 0);
  run(kept, 1);
  {
    // A group of two collectives: planned afresh, never kept.
    CaseRun a(comm_, inputs(DType::kFloat32, 0), kept);
    CaseRun b(comm_, inputs(DType::kInt64, 1),
              make(Coll::kAllGather, DType::kInt64, builtinOp(RedOp::kSum), 5,
                   Place::kOutOfPlace));
    bool ok = tcclGroupStart() == tcclSuccess;
    ok = a.issue() == tcclSuccess && ok;
    ok = b.issue() == tcclSuccess && ok;
    ok = tcclGroupEnd() == tcclSuccess && ok;
    ASSERT_TRUE(allRanksOk(ok)) << tcclGetLastError(comm_);
    for (CaseRun* r : {&a, &b}) {
      CaseResult res = r->check();
      EXPECT_TRUE(res.ok) << res.why;
    }
  }
  run(kept, 0);
  {
    // A ring of send/recv pairs on host buffers.
    const int rank = worldRank();
    std::vector<int> out(16, rank), in(16, -1);
    bool ok = tcclGroupStart() == tcclSuccess;
    ok = tcclSend(out.data(), out.size(), tcclInt32, (rank + 1) % n_, comm_, nullptr) ==
             tcclSuccess && ok;
    ok = tcclRecv(in.data(), in.size(), tcclInt32, (rank + n_ - 1) % n_, comm_, nullptr) ==
             tcclSuccess && ok;
    ok = tcclGroupEnd() == tcclSuccess && ok;
    ASSERT_TRUE(allRanksOk(ok)) << tcclGetLastError(comm_);
    EXPECT_EQ(in, std::vector<int>(16, (rank + n_ - 1) % n_));
  }
  run(kept, 1);
  run(kept, 0);
}

}  // namespace
}  // namespace ring
}  // namespace test
}  // namespace tccl
