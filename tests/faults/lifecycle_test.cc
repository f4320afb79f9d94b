/*
 * tests/faults/lifecycle_test.cc: a communicator's life beyond init and destroy (stage 7):
 * non-blocking communicators, finalize, split, shrink, revoke, and abort from another thread.
 *
 * What it is: MPI tests, each checked on every rank, with host buffers and (where a GPU is)
 * device buffers:
 *  - NonBlocking: init with blocking = 0 returns tcclInProgress, tcclCommGetAsyncError says so
 *    until the job ends, then tcclSuccess; an all-reduce returns tcclInProgress and, polled to
 *    the end, has the right sums; a call made while a job runs is refused (tcclInvalidArgument);
 *    finalize returns tcclInProgress, then every data call is refused (tcclInvalidUsage);
 *  - Finalize (blocking): the same without the polling;
 *  - Split: color = rank % 2, key = -rank (reversed order): each new communicator has the
 *    expected size and ranks, its all-reduce sums its members only, and the parent still
 *    works; the last rank passes TCCL_SPLIT_NOCOLOR and gets NULL; bad colors are refused;
 *  - Shrink: the last rank leaves (it does not call shrink); the others get a communicator of
 *    n - 1 ranks in their old order whose all-reduce works; bad exclude lists are refused;
 *  - Revoke: after it, data calls are refused, tcclCommGetAsyncError says tcclSuccess, and a
 *    shrink of the revoked communicator (excluding nobody) works;
 *  - AbortFromAnotherThread: rank 0 calls an all-reduce nobody else calls; another thread of
 *    rank 0 aborts the communicator 300 ms later: the all-reduce returns an error within 5 s
 *    and the abort returns tcclSuccess (the others abort theirs, a peer gone);
 *  - RevokeStuckJob: the same with a non-blocking communicator: the job is stuck, a revoke
 *    (tcclInProgress, polled) ends it within 5 s; tcclCommGetAsyncError then says tcclSuccess;
 *  - SecondThreadIsRefused: a second thread's call while rank 0's first is running is
 *    tcclInvalidUsage naming the cause; the first completes;
 *  - AbortStopsAWaitingKernel (GPU only): rank 0's device all-reduce, which nobody else
 *    calls, is a kernel waiting in its spin loop; tcclCommAbort stops it and returns in 5 s.
 *
 * Invariants: 2 and 3 ranks (faults_tests.cmake); every wait is bounded (a poll gives up after
 * 30 s and fails the test; CTest's timeout bounds the rest).
 *
 * NCCL counterpart: NCCL's tests of ncclCommInitRankConfig (non-blocking), ncclCommSplit,
 * ncclCommShrink, ncclCommRevoke, ncclCommAbort; nccl-tests -b (blocking) 0.
 * Added in: stage 7.
 */
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tccl.h"
#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace {

using Clock = std::chrono::steady_clock;

/// Polls tcclCommGetAsyncError until it stops saying tcclInProgress (at most 30 s).
tcclResult_t waitJob(tcclComm_t comm) {
  const auto until = Clock::now() + std::chrono::seconds(30);
  tcclResult_t state = tcclInProgress;
  while (state == tcclInProgress && Clock::now() < until) {
    if (tcclCommGetAsyncError(comm, &state) != tcclSuccess) return tcclInternalError;
    if (state == tcclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state;
}

/// rank 0's unique id, everywhere.
tcclUniqueId worldId() {
  tcclUniqueId id{};
  if (worldRank() == 0) {
    EXPECT_EQ(tcclGetUniqueId(&id), tcclSuccess);
  }
  bcast(&id, sizeof id, 0);
  return id;
}

tcclResult_t initWorld(tcclComm_t* comm, bool blocking) {
  tcclUniqueId id = worldId();
  tcclConfig_t config = TCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  tcclResult_t res = tcclCommInitRankConfig(comm, worldSize(), id, worldRank(), &config);
  if (!blocking && res == tcclInProgress) res = waitJob(*comm);
  return res;
}

/// An all-reduce of (value) over `comm` on each memory kind: every element must equal `sum`.
/// A non-blocking communicator's call is polled to the end.
void expectSum(tcclComm_t comm, float value, float sum, bool blocking = true) {
  for (MemKind kind : memKinds()) {
    SCOPED_TRACE(memKindName(kind));
    const size_t count = 1001;
    std::vector<float> in(count, value), out(count, 0.0f);
    Buffer buf(count * sizeof(float), kind);
    buf.upload(in.data(), count * sizeof(float));
    tcclResult_t res =
        tcclAllReduce(buf.data(), buf.data(), count, tcclFloat32, tcclSum, comm, nullptr);
    if (!blocking) {
      ASSERT_EQ(res, tcclInProgress);
      res = waitJob(comm);
    }
    ASSERT_EQ(res, tcclSuccess) << tcclGetLastError(comm);
    deviceSync();
    buf.download(out.data(), count * sizeof(float));
    EXPECT_EQ(out[0], sum);
    EXPECT_EQ(out[count - 1], sum);
  }
}

float worldSum() { return float(worldSize() * (worldSize() + 1) / 2); }

TEST(Lifecycle, NonBlocking) {
  tcclUniqueId id = worldId();
  tcclConfig_t config = TCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  tcclComm_t comm = nullptr;
  ASSERT_EQ(tcclCommInitRankConfig(&comm, worldSize(), id, worldRank(), &config), tcclInProgress);
  ASSERT_NE(comm, nullptr);
  // Until the job ends the communicator takes no call but the asynchronous-error poll.
  tcclResult_t state = tcclSuccess;
  ASSERT_EQ(tcclCommGetAsyncError(comm, &state), tcclSuccess);
  if (state == tcclInProgress) {
    int n = 0;
    const tcclResult_t r = tcclCommCount(comm, &n);
    // (It may have just ended: then the call works.)
    EXPECT_TRUE(r == tcclInvalidArgument || (r == tcclSuccess && n == worldSize()));
  }
  ASSERT_EQ(waitJob(comm), tcclSuccess) << tcclGetLastError(comm);
  expectSum(comm, float(worldRank() + 1), worldSum(), /*blocking=*/false);
  // A second call while the first one's job runs is refused (rank 0 only: it is the only
  // rank to call it; the job waits for the others' all-reduce, which comes after a barrier).
  std::vector<float> a(64, 1.0f);
  if (worldRank() == 0) {
    ASSERT_EQ(tcclAllReduce(a.data(), a.data(), 64, tcclFloat32, tcclSum, comm, nullptr),
              tcclInProgress);
    EXPECT_EQ(tcclAllReduce(a.data(), a.data(), 64, tcclFloat32, tcclSum, comm, nullptr),
              tcclInvalidArgument);
    EXPECT_NE(std::string(tcclGetLastError(comm)).find("tcclInProgress"), std::string::npos);
  }
  barrier();
  if (worldRank() != 0) {
    ASSERT_EQ(tcclAllReduce(a.data(), a.data(), 64, tcclFloat32, tcclSum, comm, nullptr),
              tcclInProgress);
  }
  ASSERT_EQ(waitJob(comm), tcclSuccess);
  EXPECT_EQ(a[0], float(worldSize()));
  // Finalize: in progress, then done; afterwards only destroy.
  ASSERT_EQ(tcclCommFinalize(comm), tcclInProgress);
  ASSERT_EQ(waitJob(comm), tcclSuccess);
  EXPECT_EQ(tcclAllReduce(a.data(), a.data(), 64, tcclFloat32, tcclSum, comm, nullptr),
            tcclInvalidUsage);
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

TEST(Lifecycle, BlockingFinalize) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorld(&comm, true), tcclSuccess);
  expectSum(comm, 1.0f, float(worldSize()));
  ASSERT_EQ(tcclCommFinalize(comm), tcclSuccess);
  int x = 0;
  EXPECT_EQ(tcclAllReduce(&x, &x, 1, tcclInt32, tcclSum, comm, nullptr), tcclInvalidUsage);
  EXPECT_NE(std::string(tcclGetLastError(comm)).find("finalized"), std::string::npos);
  EXPECT_EQ(tcclCommFinalize(comm), tcclInvalidUsage);
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

TEST(Lifecycle, Split) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorld(&comm, true), tcclSuccess);
  tcclComm_t sub = nullptr;
  EXPECT_EQ(tcclCommSplit(comm, -5, 0, &sub, nullptr), tcclInvalidArgument);  // (local check)
  const int n = worldSize(), me = worldRank();
  // The last rank (of 3 and more) joins nothing.
  const bool out = n >= 3 && me == n - 1;
  const int color = out ? TCCL_SPLIT_NOCOLOR : me % 2;
  ASSERT_EQ(tcclCommSplit(comm, color, -me, &sub, nullptr), tcclSuccess) << tcclGetLastError(comm);
  if (out) {
    EXPECT_EQ(sub, nullptr);
  } else {
    ASSERT_NE(sub, nullptr);
    std::vector<int> members;  // my color, reversed by the keys
    for (int r = n - 1; r >= 0; r--) {
      if (r % 2 == me % 2 && !(n >= 3 && r == n - 1)) members.push_back(r);
    }
    int subN = 0, subRank = -1;
    ASSERT_EQ(tcclCommCount(sub, &subN), tcclSuccess);
    ASSERT_EQ(tcclCommUserRank(sub, &subRank), tcclSuccess);
    EXPECT_EQ(subN, int(members.size()));
    ASSERT_GE(subRank, 0);
    ASSERT_LT(subRank, subN);
    EXPECT_EQ(members[size_t(subRank)], me);
    float sum = 0;
    for (int r : members) sum += float(r + 1);
    expectSum(sub, float(me + 1), sum);
    EXPECT_EQ(tcclCommDestroy(sub), tcclSuccess);
  }
  expectSum(comm, float(me + 1), worldSum());  // the parent still works
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

TEST(Lifecycle, Shrink) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorld(&comm, true), tcclSuccess);
  const int n = worldSize(), me = worldRank(), last = n - 1;
  tcclComm_t sub = nullptr;
  int self = me, far = n + 3, twice[2] = {last, last};
  EXPECT_EQ(tcclCommShrink(comm, &self, 1, &sub, nullptr, TCCL_SHRINK_DEFAULT),
            tcclInvalidArgument);
  EXPECT_EQ(tcclCommShrink(comm, &far, 1, &sub, nullptr, TCCL_SHRINK_DEFAULT),
            tcclInvalidArgument);
  if (me != last) {
    EXPECT_EQ(tcclCommShrink(comm, twice, 2, &sub, nullptr, TCCL_SHRINK_DEFAULT),
              tcclInvalidArgument);
    EXPECT_EQ(tcclCommShrink(comm, twice, 1, &sub, nullptr, 0x40), tcclInvalidArgument);
    ASSERT_EQ(tcclCommShrink(comm, twice, 1, &sub, nullptr, TCCL_SHRINK_DEFAULT), tcclSuccess)
        << tcclGetLastError(comm);
    int subN = 0, subRank = -1;
    ASSERT_EQ(tcclCommCount(sub, &subN), tcclSuccess);
    ASSERT_EQ(tcclCommUserRank(sub, &subRank), tcclSuccess);
    EXPECT_EQ(subN, n - 1);
    EXPECT_EQ(subRank, me);  // the order is kept
    expectSum(sub, float(me + 1), float((n - 1) * n / 2));
    EXPECT_EQ(tcclCommDestroy(sub), tcclSuccess);
  }
  barrier();  // (the last rank destroys its parent only after the others' shrink)
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

TEST(Lifecycle, Revoke) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorld(&comm, true), tcclSuccess);
  expectSum(comm, 1.0f, float(worldSize()));
  EXPECT_EQ(tcclCommRevoke(comm, 0x7), tcclInvalidArgument);
  ASSERT_EQ(tcclCommRevoke(comm, TCCL_REVOKE_DEFAULT), tcclSuccess);
  int x = 0;
  EXPECT_EQ(tcclAllReduce(&x, &x, 1, tcclInt32, tcclSum, comm, nullptr), tcclInvalidUsage);
  EXPECT_NE(std::string(tcclGetLastError(comm)).find("revoked"), std::string::npos);
  tcclResult_t state = tcclInternalError;
  ASSERT_EQ(tcclCommGetAsyncError(comm, &state), tcclSuccess);
  EXPECT_EQ(state, tcclSuccess);
  // The revoked communicator's bootstrap still makes the next one.
  tcclComm_t sub = nullptr;
  ASSERT_EQ(tcclCommShrink(comm, nullptr, 0, &sub, nullptr, TCCL_SHRINK_DEFAULT), tcclSuccess)
      << tcclGetLastError(comm);
  expectSum(sub, float(worldRank() + 1), worldSum());
  EXPECT_EQ(tcclCommDestroy(sub), tcclSuccess);
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

/// Rank 0 calls what nobody else does; `stop` ends it from another thread after 300 ms.
template <typename Stop>
void stuckThenStopped(bool blocking, Stop stop) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorld(&comm, blocking), tcclSuccess);
  if (worldRank() == 0) {
    std::vector<float> a(4096, 1.0f);
    std::atomic<bool> stopped{false};
    std::thread stopper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      stop(comm);
      stopped = true;
    });
    const auto t0 = Clock::now();
    tcclResult_t res = tcclAllReduce(a.data(), a.data(), 4096, tcclFloat32, tcclSum, comm, nullptr);
    if (!blocking && res == tcclInProgress) {
      // (A revoke is polled through the same communicator.)
      while (!stopped) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      res = waitJob(comm);
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    stopper.join();
    EXPECT_LT(s, 5.0);
    if (blocking) {
      EXPECT_NE(res, tcclSuccess);
    } else {
      EXPECT_EQ(res, tcclSuccess);  // a revoke that finished is no error
    }
  }
  barrier();
  if (worldRank() != 0) {
    EXPECT_EQ(tcclCommAbort(comm), tcclSuccess);
  } else if (!blocking) {
    EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
  }
}

TEST(Lifecycle, AbortFromAnotherThread) {
  stuckThenStopped(true, [](tcclComm_t comm) { EXPECT_EQ(tcclCommAbort(comm), tcclSuccess); });
}

TEST(Lifecycle, RevokeStuckJob) {
  stuckThenStopped(false, [](tcclComm_t comm) {
    EXPECT_EQ(tcclCommRevoke(comm, TCCL_REVOKE_DEFAULT), tcclInProgress);
  });
}

/// Two threads of rank 0 call on one communicator at once: the second is refused (NCCL's rule,
/// which NCCL does not check), the first completes with the right sum once the others call.
TEST(Lifecycle, SecondThreadIsRefused) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorld(&comm, true), tcclSuccess);
  std::vector<float> a(256, 1.0f);
  if (worldRank() == 0) {
    tcclResult_t first = tcclInternalError;
    std::thread t([&] {
      first = tcclAllReduce(a.data(), a.data(), 256, tcclFloat32, tcclSum, comm, nullptr);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // (t waits for the others)
    std::vector<float> b(256, 1.0f);
    EXPECT_EQ(tcclAllReduce(b.data(), b.data(), 256, tcclFloat32, tcclSum, comm, nullptr),
              tcclInvalidUsage);
    EXPECT_NE(std::string(tcclGetLastError(comm)).find("another thread"), std::string::npos);
    barrier();  // now the others join the first call
    t.join();
    EXPECT_EQ(first, tcclSuccess);
  } else {
    barrier();
    ASSERT_EQ(tcclAllReduce(a.data(), a.data(), 256, tcclFloat32, tcclSum, comm, nullptr),
              tcclSuccess);
  }
  EXPECT_EQ(a[0], float(worldSize()));
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

/// Device buffers (GPU only): rank 0's kernel waits for peers that never call; its abort
/// (the launch returned at once) stops the kernel and returns within 5 s.
TEST(Lifecycle, AbortStopsAWaitingKernel) {
  if (!haveGpu()) GTEST_SKIP() << "no GPU";
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorld(&comm, true), tcclSuccess);
  // Every rank's device connections first (they are made at the first call, with every
  // rank's part in the exchange): the kernel below then waits for data, not for a connection.
  Buffer buf(4096 * sizeof(float), MemKind::kDevice);
  EXPECT_EQ(tcclAllReduce(buf.data(), buf.data(), 4096, tcclFloat32, tcclSum, comm, nullptr),
            tcclSuccess);
  deviceSync();
  barrier();
  if (worldRank() == 0) {
    // (EXPECT, not ASSERT: the others wait at the barrier below whatever happens here.)
    EXPECT_EQ(tcclAllReduce(buf.data(), buf.data(), 4096, tcclFloat32, tcclSum, comm, nullptr),
              tcclSuccess);  // launched
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = Clock::now();
    EXPECT_EQ(tcclCommAbort(comm), tcclSuccess);
    deviceSync();
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  }
  barrier();
  if (worldRank() != 0) {
    EXPECT_EQ(tcclCommAbort(comm), tcclSuccess);
  }
}

}  // namespace
}  // namespace test
}  // namespace tccl
