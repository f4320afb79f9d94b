/*
 * tests/p2p/p2p_group_test.cc: group semantics of send/recv and several communicators.
 *
 * What it is: the tests that break a wrong scheduler rather than a wrong copy:
 *  - every rank sends to and receives from every rank (itself included) in one group, with a
 *    different count for every ordered pair (zero included);
 *  - ranks post the same group in different orders (even ranks all receives first in ascending
 *    peer order, odd ranks all sends first in descending order) with 16 MiB messages, far past
 *    the FIFO, so a scheduler that runs operations in issue order deadlocks (test timeout);
 *  - several sends to the same peer in one group, matched in issue order;
 *  - data that reaches a rank before it posts the receive (half the ranks start late);
 *  - two communicators (one with reversed rank numbers) used in turn and inside one group, and
 *    several communicators alive at once, destroyed in another order than created.
 *
 * Invariants: every rank makes the same sequence of tccl calls per test (only the order inside
 * a group differs), and every test ends with an all-rank agreement on the outcome.
 *
 * NCCL counterpart: NCCL's group semantics (src/group.cc), tested as nccl-tests does not.
 * Added in: stage 1.
 */
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "p2p_patterns.h"

namespace tccl {
namespace test {
namespace p2p {
namespace {

/// One send or receive of a group, with its buffer and what its data must be.
struct Op {
  tcclComm_t comm;
  bool isSend;
  int peer;
  size_t count;
  int srcRank;  // whose fillData the data is: this rank for a send, the peer for a receive
  int seed;
  std::unique_ptr<GuardedBuffer> buf;
};

Op makeOp(tcclComm_t comm, bool isSend, int self, int peer, size_t count, int seed, DType t,
          MemKind kind) {
  Op op{comm,
        isSend,
        peer,
        count,
        isSend ? self : peer,
        seed,
        std::make_unique<GuardedBuffer>(count * dtypeSize(t), kind)};
  if (isSend) op.buf->fillAt(0, count, t, self, seed);
  return op;
}

/// Issues the ops in vector order (the caller opens and closes the group).
bool issue(std::vector<Op>& ops, DType t, std::string* why) {
  for (Op& op : ops) {
    tcclComm_t comm = op.comm;  // named `comm` for P2P_TRY's message
    if (op.isSend) {
      P2P_TRY(tcclSend(op.buf->data(), op.count, toTccl(t), op.peer, comm, nullptr));
    } else {
      P2P_TRY(tcclRecv(op.buf->data(), op.count, toTccl(t), op.peer, comm, nullptr));
    }
  }
  return true;
}

/// Checks every op: received data equals the sender's fillData; sent data is unchanged;
/// no guard was touched.
bool checkOps(std::vector<Op>& ops, DType t, std::string* why) {
  deviceSync();
  Checker c;
  for (size_t i = 0; i < ops.size(); i++) {
    Op& op = ops[i];
    std::string what = std::string(op.isSend ? "send" : "recv") + " #" + std::to_string(i) +
                       (op.isSend ? " to " : " from ") + std::to_string(op.peer);
    std::string reason;
    const uint8_t* v = op.buf->view();
    c.check(op.buf->guardsIntact(v, &reason), reason, what + ": ");
    c.check(
        matchesInput(v + GuardedBuffer::kGuard, op.count, t, op.srcRank, op.seed, what, &reason),
        reason);
  }
  if (!c.ok) *why = c.why;
  return c.ok;
}

/// Both-sided agreement at the end of a test.
void agree(bool ok, const std::string& why) {
  EXPECT_TRUE(ok) << why;
  bool all = allRanksOk(ok);
  if (ok) {
    EXPECT_TRUE(all) << "another rank failed (see its output)";
  }
}

/// A test made of several steps: after each step all ranks agree whether to go on, so a rank
/// whose check failed never skips a call that the other ranks are making.
class Steps {
 public:
  /// Records this rank's outcome of a step; true on every rank iff it succeeded everywhere.
  /// `why` is taken by reference and read after the step ran (argument order is unspecified).
  bool operator()(bool ok, const std::string& why, const std::string& prefix = "") {
    if (!ok && localOk_) {
      localOk_ = false;
      why_ = prefix + why;
    }
    bool all = allRanksOk(ok);
    if (!all) anyFailed_ = true;
    return all;
  }
  ~Steps() {
    EXPECT_TRUE(localOk_) << why_;
    if (localOk_) {
      EXPECT_FALSE(anyFailed_) << "another rank failed (see its output)";
    }
  }

 private:
  bool localOk_ = true, anyFailed_ = false;
  std::string why_;
};

/// Runs `ops` in one group on `comm` and checks them.
bool runGroup(tcclComm_t comm, std::vector<Op>& ops, DType t, std::string* why) {
  P2P_TRY(tcclGroupStart());
  bool issued = issue(ops, t, why);
  // Close the group even when an issue failed, so no group stays open for the next test.
  tcclResult_t end = tcclGroupEnd();
  if (!issued) return false;
  if (end != tcclSuccess) {
    *why = std::string("tcclGroupEnd returned ") + tcclGetErrorString(end) + ": " +
           tcclGetLastError(comm);
    return false;
  }
  return checkOps(ops, t, why);
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
    ASSERT_EQ(initResult_, tcclSuccess) << tcclGetLastError(nullptr);
    rank_ = worldRank();
    n_ = worldSize();
  }
  static tcclComm_t comm_;
  static tcclResult_t initResult_;
  int rank_ = 0, n_ = 1;
};
tcclComm_t GroupTest::comm_ = nullptr;
tcclResult_t GroupTest::initResult_ = tcclSuccess;

// Count for the message src -> dst: distinct for every ordered pair, zero for some.
size_t pairCount(int src, int dst, size_t scale) {
  if ((src + 2 * dst) % 7 == 3) return 0;
  return 1 + static_cast<size_t>((src * 7 + dst * 13) % 11) * 1031 * scale + src;
}
int pairSeed(int src, int dst) { return 1000 + src * 64 + dst; }

TEST_P(GroupTest, AllPeersOneGroupSmall) {
  std::vector<Op> ops;
  for (int p = 0; p < n_; p++) {
    ops.push_back(makeOp(comm_, true, rank_, p, pairCount(rank_, p, 1), pairSeed(rank_, p),
                         DType::kInt32, GetParam()));
    ops.push_back(makeOp(comm_, false, rank_, p, pairCount(p, rank_, 1), pairSeed(p, rank_),
                         DType::kInt32, GetParam()));
  }
  std::string why;
  agree(runGroup(comm_, ops, DType::kInt32, &why), why);
}

TEST_P(GroupTest, AllPeersOneGroupLarge) {
  // Counts up to ~1 M float64 (8 MiB) per pair: most messages span many FIFO slots.
  std::vector<Op> ops;
  for (int p = n_ - 1; p >= 0; p--) {  // receives first, peers descending
    ops.push_back(makeOp(comm_, false, rank_, p, pairCount(p, rank_, 100), pairSeed(p, rank_),
                         DType::kFloat64, GetParam()));
  }
  for (int p = 0; p < n_; p++) {
    ops.push_back(makeOp(comm_, true, rank_, p, pairCount(rank_, p, 100), pairSeed(rank_, p),
                         DType::kFloat64, GetParam()));
  }
  std::string why;
  agree(runGroup(comm_, ops, DType::kFloat64, &why), why);
}

TEST_P(GroupTest, MixedIssueOrderDoesNotDeadlock) {
  // Even ranks: all receives (ascending peers), then all sends. Odd ranks: all sends
  // (descending peers), then all receives. 16 MiB each: a blocking issue-order schedule would
  // have rank 0 wait for a receive while rank 1 waits for its first send to drain.
  const size_t count = size_t{16} << 20;
  std::vector<Op> recvs, sends;
  for (int i = 0; i < n_; i++) {
    int p = rank_ % 2 == 0 ? i : n_ - 1 - i;
    recvs.push_back(
        makeOp(comm_, false, rank_, p, count, pairSeed(p, rank_), DType::kUint8, GetParam()));
    sends.push_back(
        makeOp(comm_, true, rank_, p, count, pairSeed(rank_, p), DType::kUint8, GetParam()));
  }
  std::vector<Op> ops;
  auto append = [&ops](std::vector<Op>& v) {
    for (Op& op : v) ops.push_back(std::move(op));
  };
  if (rank_ % 2 == 0) {
    append(recvs);
    append(sends);
  } else {
    append(sends);
    append(recvs);
  }
  std::string why;
  agree(runGroup(comm_, ops, DType::kUint8, &why), why);
}

TEST_P(GroupTest, SeveralSendsToOnePeerMatchInOrder) {
  // Five messages to the next rank and five from the previous one, with different sizes and
  // seeds: a receive matched with the wrong send gets the wrong bytes (or a size error).
  const size_t counts[] = {5, (size_t{1} << 20) + 1, 0, size_t{16} << 20, 33};
  const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
  std::vector<Op> ops;
  for (int i = 0; i < 5; i++) {
    Op s = makeOp(comm_, true, rank_, next, counts[i], 300 + i, DType::kInt8, GetParam());
    Op r = makeOp(comm_, false, rank_, prev, counts[i], 300 + i, DType::kInt8, GetParam());
    if (rank_ % 2 == 0) {  // interleaved
      ops.push_back(std::move(s));
      ops.push_back(std::move(r));
    } else {  // receives at the end, sends at the front: same order per peer
      ops.insert(ops.begin() + i, std::move(s));
      ops.push_back(std::move(r));
    }
  }
  std::string why;
  agree(runGroup(comm_, ops, DType::kInt8, &why), why);
}

TEST_P(GroupTest, DataThatArrivesBeforeItsReceiveIsPosted) {
  // Every rank sends to the next and receives from the previous, but half the ranks wait
  // 100 ms before their group: the early ranks' bytes reach them before the receive exists.
  // The proxy must keep such steps (in the socket or a slot) and deliver them to the receive
  // once it is posted. Sizes: one byte, a few FIFO steps, and more than the FIFO holds (the
  // early sender then also waits for the late receiver). Default TCCL_BUFFSIZE: 512 KiB steps.
  const size_t step = size_t{512} << 10;
  const size_t counts[] = {1, 3 * step + 5, 12 * step + 7};
  const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
  Steps steps;
  for (int late = 0; late < 2; late++) {  // odd ranks late, then even ranks late
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
      std::vector<Op> ops;
      ops.push_back(makeOp(comm_, true, rank_, next, counts[i], 500 + int(i), DType::kUint8,
                           GetParam()));
      ops.push_back(makeOp(comm_, false, rank_, prev, counts[i], 500 + int(i), DType::kUint8,
                           GetParam()));
      if (rank_ % 2 == (late == 0 ? 1 : 0)) usleep(100 * 1000);
      std::string why;
      const std::string what = "count " + std::to_string(counts[i]) + ": ";
      if (!steps(runGroup(comm_, ops, DType::kUint8, &why), why, what)) return;
    }
  }
}

TEST_P(GroupTest, TwoCommunicatorsInTurnAndInOneGroup) {
  tcclComm_t rev = nullptr;
  ASSERT_EQ(initWorldComm(&rev, /*reversed=*/true), tcclSuccess) << tcclGetLastError(nullptr);
  int revRank = -1;
  ASSERT_EQ(tcclCommUserRank(rev, &revRank), tcclSuccess);
  EXPECT_EQ(revRank, n_ - 1 - rank_);

  // In turn: the same pattern on one, then the other, twice.
  std::string why;
  Steps step;
  bool ok = true;
  for (int round = 0; round < 2 && ok; round++) {
    ok = step(runPattern(comm_, Pattern::kShift, DType::kFloat32, 1000 + round, GetParam(), 0,
                         40 + round, &why),
              why) &&
         step(runPattern(rev, Pattern::kShift, DType::kFloat32, 1000 + round, GetParam(), 0,
                         50 + round, &why),
              why) &&
         step(runPattern(comm_, Pattern::kAlltoAll, DType::kInt64, 333, GetParam(), 0, 60, &why),
              why) &&
         step(runPattern(rev, Pattern::kGather, DType::kUint8, 4099, GetParam(), n_ - 1, 70, &why),
              why);
  }
  // Interleaved in one group: world comm, reversed comm, world comm again. The reversed comm's
  // "next" is the world comm's previous rank, so the two shifts go opposite ways at once.
  if (ok) {
    const int wNext = (rank_ + 1) % n_, wPrev = (rank_ + n_ - 1) % n_;
    const int rNext = (revRank + 1) % n_, rPrev = (revRank + n_ - 1) % n_;
    const size_t big = (size_t{4} << 20) + 5;
    std::vector<Op> ops;
    ops.push_back(makeOp(comm_, true, rank_, wNext, big, 80, DType::kUint8, GetParam()));
    ops.push_back(makeOp(rev, false, revRank, rPrev, big, 81, DType::kUint8, GetParam()));
    ops.push_back(makeOp(rev, true, revRank, rNext, big, 81, DType::kUint8, GetParam()));
    ops.push_back(makeOp(comm_, false, rank_, wPrev, big, 80, DType::kUint8, GetParam()));
    step(runGroup(comm_, ops, DType::kUint8, &why), why, "interleaved group: ");
  }
  EXPECT_EQ(tcclCommDestroy(rev), tcclSuccess);
}

TEST_P(GroupTest, SeveralCommunicatorsAlive) {
  constexpr int kComms = 4;
  tcclComm_t comms[kComms] = {};
  for (int i = 0; i < kComms; i++)
    ASSERT_EQ(initWorldComm(&comms[i], /*reversed=*/i % 2 == 1), tcclSuccess)
        << "communicator " << i << ": " << tcclGetLastError(nullptr);
  std::string why;
  Steps step;
  bool ok = true;
  // Round robin over the communicators, different data on each.
  for (int round = 0; round < 2 && ok; round++)
    for (int i = 0; i < kComms && ok; i++)
      ok = step(runPattern(comms[i], round == 0 ? Pattern::kShift : Pattern::kNeighbor,
                           DType::kInt32, 513 + i, GetParam(), 0, 90 + i, &why),
                why, "communicator " + std::to_string(i) + ": ");
  // Destroy in an order unlike creation; the survivors must keep working.
  EXPECT_EQ(tcclCommDestroy(comms[2]), tcclSuccess);
  EXPECT_EQ(tcclCommDestroy(comms[0]), tcclSuccess);
  if (ok) {
    ok = step(runPattern(comms[3], Pattern::kAlltoAll, DType::kInt8, 77, GetParam(), 0, 99, &why),
              why, "after destroying two, communicator 3: ") &&
         step(runPattern(comms[1], Pattern::kExchange, DType::kInt8, 77, GetParam(), 0, 98, &why),
              why, "after destroying two, communicator 1: ");
  }
  EXPECT_EQ(tcclCommDestroy(comms[3]), tcclSuccess);
  EXPECT_EQ(tcclCommDestroy(comms[1]), tcclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Mem, GroupTest, ::testing::ValuesIn(memKinds()),
                         [](const ::testing::TestParamInfo<MemKind>& info) {
                           return std::string(memKindName(info.param));
                         });

}  // namespace
}  // namespace p2p
}  // namespace test
}  // namespace tccl
