/*
 * tests/ring/ring_group_test.cc: collectives batched in groups, mixed with send/recv, issued
 * back to back, and a group that fails.
 *
 * What it is: the group semantics of chapter 2 (group.cc, plan_ring.cc, group_launch.cc):
 *  - several different collectives in one group (each is a WorkElem of every ring item and
 *    must come out as if issued alone), also with groups nested inside the group;
 *  - collectives and tcclSend/tcclRecv in one group (a ring phase, then a p2p phase);
 *  - many collectives back to back without a synchronization in between (on device buffers
 *    they queue on the stream: only stream order keeps them apart), and many in one group;
 *  - more in one group than a WorkBatch holds (200 > kMaxWorkElems = 128): stage 2 refuses
 *    such a group with tcclInvalidUsage (NCCL has no such limit); the test accepts that, or
 *    a run of them all, but nothing in between, and the same verdict on every rank;
 *  - a group with an invalid call in it: the call fails, tcclGroupEnd returns the error and
 *    launches nothing (the valid call's output stays poison), and the communicator still works.
 * Each collective is a ring_case.h CaseRun: prepared, issued inside the group, checked after it.
 *
 * Invariants: every rank issues the same calls in the same order; GroupEnd's verdict is agreed
 * between ranks (allRanksOk) before anything is checked, so one failing rank never leaves the
 * others waiting in a later collective.
 *
 * NCCL counterpart: ncclGroupStart/ncclGroupEnd semantics (src/group.cc); nccl-tests' -m
 * (aggregated operations) in spirit.
 * Added in: stage 2.
 */
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ring_case.h"

namespace tccl {
namespace test {
namespace ring {
namespace {

constexpr int kSeed = 21;

/// One table per signedness, large enough for every case here.
const Inputs& inputsFor(DType t) {
  static std::map<bool, std::unique_ptr<Inputs>> cache;
  auto& slot = cache[isSignedType(t)];
  if (!slot) slot = std::make_unique<Inputs>(worldSize(), isSignedType(t), kSeed, 8192 * 8);
  return *slot;
}

class GroupTest : public ::testing::TestWithParam<MemKind> {
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
    rank_ = worldRank();
  }

  Case make(Coll coll, DType t, OpSpec op, size_t count, Place place, int root = 0) const {
    return Case{coll, t, op, count, place, root, GetParam()};
  }
  std::unique_ptr<CaseRun> prepare(const Case& c) const {
    return std::make_unique<CaseRun>(comm_, inputsFor(c.type), c);
  }

  /// After the group: the ranks agree that every call went through, then each case is checked.
  void checkAll(const std::vector<std::unique_ptr<CaseRun>>& runs, bool callsOk) {
    deviceSync();
    ASSERT_TRUE(allRanksOk(callsOk)) << "a call failed on some rank (see its output)";
    for (const auto& run : runs) {
      CaseResult r = run->check();
      EXPECT_TRUE(r.ok) << r.why;
    }
  }

  static tcclComm_t comm_;
  static tcclResult_t initResult_;
  int n_ = 1, rank_ = 0;
};
tcclComm_t GroupTest::comm_ = nullptr;
tcclResult_t GroupTest::initResult_ = tcclSuccess;

/// Issues every run; false (with a test failure) when a call fails.
bool issueAll(const std::vector<std::unique_ptr<CaseRun>>& runs) {
  bool ok = true;
  for (const auto& run : runs) {
    if (run->issue() != tcclSuccess) {
      ADD_FAILURE() << run->result().why;
      ok = false;
    }
  }
  return ok;
}

TEST_P(GroupTest, DifferentCollectivesInOneGroup) {
  std::vector<std::unique_ptr<CaseRun>> runs;
  runs.push_back(prepare(
      make(Coll::kAllReduce, DType::kFloat32, builtinOp(RedOp::kSum), 1021, Place::kOutOfPlace)));
  runs.push_back(
      prepare(make(Coll::kAllGather, DType::kInt32, builtinOp(RedOp::kSum), 333, Place::kInPlace)));
  runs.push_back(prepare(make(Coll::kBroadcast, DType::kBfloat16, builtinOp(RedOp::kSum), 777,
                              Place::kOutOfPlace, n_ - 1)));
  runs.push_back(prepare(
      make(Coll::kReduceScatter, DType::kInt8, builtinOp(RedOp::kMax), 100, Place::kInPlace)));
  runs.push_back(prepare(
      make(Coll::kReduce, DType::kFloat64, builtinOp(RedOp::kProd), 55, Place::kOutOfPlace, 0)));
  runs.push_back(
      prepare(make(Coll::kAllReduce, DType::kFloat16,
                   preMulOp(OpSpec::Kind::kPreMulHost, 1.0 / 3.0, false, "premul_host_round"), 4099,
                   Place::kInPlace)));
  runs.push_back(prepare(
      make(Coll::kAllReduce, DType::kUint8, builtinOp(RedOp::kAvg), 1, Place::kOutOfPlace)));
  bool ok = tcclGroupStart() == tcclSuccess;
  ok = issueAll(runs) && ok;
  tcclResult_t end = tcclGroupEnd();
  EXPECT_EQ(end, tcclSuccess) << tcclGetLastError(comm_);
  checkAll(runs, ok && end == tcclSuccess);
}

TEST_P(GroupTest, NestedGroups) {
  std::vector<std::unique_ptr<CaseRun>> runs;
  runs.push_back(prepare(
      make(Coll::kAllReduce, DType::kInt64, builtinOp(RedOp::kMin), 3000, Place::kOutOfPlace)));
  runs.push_back(prepare(
      make(Coll::kAllGather, DType::kUint8, builtinOp(RedOp::kSum), 17, Place::kOutOfPlace)));
  runs.push_back(prepare(
      make(Coll::kBroadcast, DType::kUint32, builtinOp(RedOp::kSum), 1024, Place::kInPlace, 0)));
  bool ok = tcclGroupStart() == tcclSuccess;
  ok = tcclGroupStart() == tcclSuccess && ok;
  ok = runs[0]->issue() == tcclSuccess && ok;
  ok = tcclGroupEnd() == tcclSuccess && ok;  // inner end: nothing launches yet
  ok = runs[1]->issue() == tcclSuccess && ok;
  ok = tcclGroupStart() == tcclSuccess && ok;
  ok = runs[2]->issue() == tcclSuccess && ok;
  ok = tcclGroupEnd() == tcclSuccess && ok;
  tcclResult_t end = tcclGroupEnd();
  EXPECT_EQ(end, tcclSuccess) << tcclGetLastError(comm_);
  checkAll(runs, ok && end == tcclSuccess);
}

TEST_P(GroupTest, CollectivesAndSendRecvInOneGroup) {
  const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
  const DType pt = DType::kInt32;
  const size_t pcount = 5003;
  const size_t pbytes = pcount * dtypeSize(pt);
  const Inputs& in = inputsFor(pt);
  // The message of rank r is its input block at offset 7 (a different slice from the cases').
  std::vector<char> msg(pbytes);
  in.fill(msg.data(), pt, rank_, 7, pcount);
  CollBuffer sendBuf(pbytes, GetParam()), recvBuf(pbytes, GetParam());
  sendBuf.write(0, msg.data(), pbytes);

  std::vector<std::unique_ptr<CaseRun>> runs;
  runs.push_back(prepare(
      make(Coll::kAllReduce, DType::kFloat32, builtinOp(RedOp::kSum), 2049, Place::kOutOfPlace)));
  runs.push_back(prepare(make(Coll::kReduceScatter, DType::kBfloat16, builtinOp(RedOp::kMin), 129,
                              Place::kOutOfPlace)));
  bool ok = tcclGroupStart() == tcclSuccess;
  ok = runs[0]->issue() == tcclSuccess && ok;
  ok = tcclSend(sendBuf.data(), pcount, toTccl(pt), next, comm_, nullptr) == tcclSuccess && ok;
  ok = tcclRecv(recvBuf.data(), pcount, toTccl(pt), prev, comm_, nullptr) == tcclSuccess && ok;
  ok = runs[1]->issue() == tcclSuccess && ok;
  tcclResult_t end = tcclGroupEnd();
  EXPECT_EQ(end, tcclSuccess) << tcclGetLastError(comm_);
  checkAll(runs, ok && end == tcclSuccess);

  std::vector<char> expected(pbytes);
  in.fill(expected.data(), pt, prev, 7, pcount);
  const uint8_t* v = recvBuf.view();
  std::string why;
  EXPECT_TRUE(resultMatches(v + CollBuffer::kGuard, expected.data(), pcount, pt, 0, true, &why))
      << "message from rank " << prev << ": " << why;
  EXPECT_TRUE(recvBuf.guardsIntact(v, &why)) << why;
}

// Regression (found by the soak test): on a fresh communicator, a collective and a send/recv to
// the ring neighbours in one group are the first use of the SAME connectors (ring channel 0 and
// p2p share (peer, channel 0, direction)). Each must be connected once: connecting one twice
// replaced its listener and the peer's connect was refused.
TEST_P(GroupTest, FirstUseOfConnectorsSharedByRingAndP2p) {
  tcclComm_t fresh = nullptr;
  ASSERT_EQ(initWorldComm(&fresh), tcclSuccess) << tcclGetLastError(nullptr);
  const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
  const size_t count = 64, pcount = 16;
  std::vector<int32_t> in(count), sum(count, -1), mine(pcount), from(pcount, -1);
  for (size_t i = 0; i < count; i++) in[i] = int32_t(rank_ + i);
  for (size_t i = 0; i < pcount; i++) mine[i] = int32_t(1000 * rank_ + i);
  Buffer inB(count * 4, GetParam()), sumB(count * 4, GetParam()), mineB(pcount * 4, GetParam()),
      fromB(pcount * 4, GetParam());
  inB.upload(in.data(), count * 4);
  mineB.upload(mine.data(), pcount * 4);
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  EXPECT_EQ(tcclAllReduce(inB.data(), sumB.data(), count, tcclInt32, tcclSum, fresh, nullptr),
            tcclSuccess);
  EXPECT_EQ(tcclSend(mineB.data(), pcount, tcclInt32, next, fresh, nullptr), tcclSuccess);
  EXPECT_EQ(tcclRecv(fromB.data(), pcount, tcclInt32, prev, fresh, nullptr), tcclSuccess);
  EXPECT_EQ(tcclGroupEnd(), tcclSuccess) << tcclGetLastError(fresh);
  deviceSync();
  sumB.download(sum.data(), count * 4);
  fromB.download(from.data(), pcount * 4);
  for (size_t i = 0; i < count; i++) {
    ASSERT_EQ(sum[i], int32_t(n_ * (n_ - 1) / 2 + n_ * int(i))) << "allreduce element " << i;
  }
  for (size_t i = 0; i < pcount; i++) {
    ASSERT_EQ(from[i], int32_t(1000 * prev + int(i))) << "message element " << i;
  }
  EXPECT_EQ(tcclCommDestroy(fresh), tcclSuccess);
}

TEST_P(GroupTest, ManyCollectivesBackToBack) {
  // 40 collectives, issued one after the other with no synchronization in between (device
  // buffers: all queued on the stream), then checked together.
  const DType types[] = {DType::kFloat32, DType::kInt8,  DType::kBfloat16, DType::kUint64,
                         DType::kFloat16, DType::kInt32, DType::kFloat64,  DType::kUint8};
  std::vector<std::unique_ptr<CaseRun>> runs;
  for (int i = 0; i < 40; i++) {
    const Coll coll = allColls()[i % 5];
    const DType t = types[i % 8];
    const RedOp op = allRedOps()[(i / 5) % 5];
    const size_t count = 1 + size_t(i) * 97;
    const Place place = i % 3 == 0 ? Place::kInPlace : Place::kOutOfPlace;
    runs.push_back(prepare(make(coll, t, builtinOp(op), count, place, i % n_)));
  }
  checkAll(runs, issueAll(runs));
}

TEST_P(GroupTest, ManyCollectivesInOneGroup) {
  std::vector<std::unique_ptr<CaseRun>> runs;
  for (int i = 0; i < 100; i++) {
    const DType t = i % 2 ? DType::kInt32 : DType::kFloat32;
    runs.push_back(prepare(make(i % 4 == 3 ? Coll::kAllGather : Coll::kAllReduce, t,
                                builtinOp(i % 3 ? RedOp::kSum : RedOp::kMax), 1 + size_t(i) * 13,
                                Place::kOutOfPlace)));
  }
  bool ok = tcclGroupStart() == tcclSuccess;
  ok = issueAll(runs) && ok;
  tcclResult_t end = tcclGroupEnd();
  EXPECT_EQ(end, tcclSuccess) << tcclGetLastError(comm_);
  checkAll(runs, ok && end == tcclSuccess);
}

TEST_P(GroupTest, MoreCollectivesThanOneBatchHolds) {
  // 200 collectives in one group: more than a WorkBatch holds (kMaxWorkElems, work.h). NCCL
  // has no such limit; tccl either runs them all or refuses the whole group cleanly with
  // tcclInvalidUsage and a message, on every rank alike, and is still usable afterwards.
  std::vector<std::unique_ptr<CaseRun>> runs;
  for (int i = 0; i < 200; i++) {
    runs.push_back(prepare(make(Coll::kAllReduce, DType::kInt32, builtinOp(RedOp::kSum),
                                1 + size_t(i), Place::kOutOfPlace)));
  }
  bool ok = tcclGroupStart() == tcclSuccess;
  ok = issueAll(runs) && ok;
  const tcclResult_t end = tcclGroupEnd();
  ASSERT_TRUE(allRanksOk(ok)) << "a call inside the group failed on some rank";
  const bool ranAll = allRanksOk(end == tcclSuccess);
  if (ranAll) {
    checkAll(runs, true);
  } else {
    EXPECT_EQ(end, tcclInvalidUsage) << tcclGetErrorString(end);
    EXPECT_STRNE(tcclGetLastError(comm_), "");
    deviceSync();
    std::string why;
    for (const auto& run : runs) {
      EXPECT_TRUE(run->recvUntouched(&why)) << "part of a refused group ran: " << why;
    }
    std::vector<std::unique_ptr<CaseRun>> after;
    after.push_back(prepare(
        make(Coll::kAllReduce, DType::kInt32, builtinOp(RedOp::kSum), 77, Place::kOutOfPlace)));
    checkAll(after, issueAll(after));
  }
}

TEST_P(GroupTest, InvalidCallFailsTheWholeGroup) {
  auto valid = prepare(
      make(Coll::kAllReduce, DType::kFloat32, builtinOp(RedOp::kSum), 1021, Place::kOutOfPlace));
  CollBuffer bad(1021 * 4, GetParam());
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  EXPECT_EQ(valid->issue(), tcclSuccess) << valid->result().why;
  EXPECT_EQ(
      tcclAllReduce(bad.data(), bad.data(), 1021, tcclFloat32, tcclRedOp_t(99), comm_, nullptr),
      tcclInvalidArgument);
  EXPECT_EQ(tcclGroupEnd(), tcclInvalidArgument) << "the group must report the failed call";
  EXPECT_STRNE(tcclGetLastError(comm_), "");
  deviceSync();
  // Nothing was launched: the valid call's output is still all poison.
  std::string why;
  EXPECT_TRUE(valid->recvUntouched(&why)) << "the valid call of a failed group ran: " << why;
  // The communicator still works: run a valid collective.
  auto after = prepare(
      make(Coll::kAllReduce, DType::kInt32, builtinOp(RedOp::kSum), 77, Place::kOutOfPlace));
  std::vector<std::unique_ptr<CaseRun>> runs;
  runs.push_back(std::move(after));
  checkAll(runs, issueAll(runs));
}

INSTANTIATE_TEST_SUITE_P(Ring, GroupTest, ::testing::ValuesIn(memKinds()),
                         [](const ::testing::TestParamInfo<MemKind>& info) {
                           return std::string(memKindName(info.param));
                         });

}  // namespace
}  // namespace ring
}  // namespace test
}  // namespace tccl
