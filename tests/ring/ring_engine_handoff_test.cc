/*
 * tests/ring/ring_engine_handoff_test.cc: a group over two communicators whose second one's
 * last sends outlive its item (issue #36, the soak's hang), replayed in a fixed order.
 *
 * What it is: while a host batch runs, its items are the proxy's progress engine and the proxy
 * thread parks (proxy.h). An item may return with steps published but not yet sent: a staged
 * send (a reduction with a pre- or post-op, or the forward of a ring reduce) posts and goes on,
 * and when the socket is full the bytes wait in the FIFO for whoever runs the next pass. The
 * test builds exactly that, on two ranks of one process (threads, tcclCommInitAll) over the
 * socket transport (NET/Socket from stage 6), with two communicators X and R:
 *
 *   rank 0 (A): group { tcclRecv(X, from 1); tcclReduce(R, avg, root 1, 4 MiB) }
 *   rank 1 (B): waits until A has published every byte of its reduce (A's R send FIFO, read
 *               through the stage's internals) and A's worker has returned, then
 *               tcclReduce(R, root 1); tcclSend(X, to 0)
 *
 * The 4 MiB are the FIFO's eight steps (published without waiting for a slot) and far more
 * than the two 64 KiB socket buffers hold while B's proxy leaves an undecided step in the
 * socket (fifo.h), so A's reduce item returns with most of its steps unsent. A's calling
 * thread is then blocked collecting X's batch, which waits for B's send, which comes after
 * B's reduce, which needs those steps. Before the fix nobody sent them: the items were done,
 * and the proxy thread stayed parked until the caller collected R's batch (hostBatchEnd in
 * finishHostBatch), i.e. never. With the fix the last item to return ends the engine role on
 * its own thread (WorkerPool's `last`, executor_host.cc) and the proxy thread sends them.
 *
 * Invariants: the ranks run in a forked child (tests/p2p/p2p_fork_util.h) that the test kills
 * at a deadline, so the old code fails in seconds instead of hanging; the test process itself
 * makes no tccl call. Connections are made by a warm-up before the replay, so that the map of
 * connectors B reads is no longer changed by A's thread.
 *
 * NCCL counterpart: none (NCCL's proxy thread never steps aside for host threads).
 * Added in: the issue #36 fix, for stage 3 (the host fast path) and every later stage.
 */
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <thread>
#include <vector>

#include "comm.h"
#include "p2p_fork_util.h"
#include "tccl.h"
#include "transport.h"
#include "../thread_devices.h"

namespace {

using tccl::test::p2p::Child;
using tccl::test::p2p::ChildEnd;

constexpr int kA = 0;                        // the rank whose group leaves sends behind
constexpr int kB = 1;                        // the reduce's root
constexpr size_t kCount = (4u << 20) / 4;    // int32 elements: 4 MiB, the FIFO's 8 steps
constexpr double kChildSeconds = 20;         // the replay takes well under a second

/// Bytes published so far by `comm` on its send connectors to `peer`, counted from the
/// tails in `base` (one per connector, in map order): the sizes of the steps in between.
/// Reads the FIFO counters the way the proxy does (acquire on tail, then the sizes).
size_t publishedBytes(tcclComm_t comm, int peer, const std::vector<uint64_t>& base) {
  size_t bytes = 0, i = 0;
  for (auto& [key, c] : comm->connectors) {
    if (!c->isSend || c->peer != peer || c->conn == nullptr) continue;
    const uint64_t tail = tccl::loadAcquire(&c->conn->fifo->tail);
    for (uint64_t s = base[i]; s < tail; s++) bytes += size_t(c->conn->fifo->sizes[s % tccl::kNSteps]);
    i++;
  }
  return bytes;
}

std::vector<uint64_t> sendTails(tcclComm_t comm, int peer) {
  std::vector<uint64_t> tails;
  for (auto& [key, c] : comm->connectors) {
    if (!c->isSend || c->peer != peer || c->conn == nullptr) continue;
    tails.push_back(tccl::loadAcquire(&c->conn->fifo->tail));
  }
  return tails;
}

/// The two ranks, as threads of this (child) process. Returns 0 when both finished with the
/// right data; the deadline of the parent catches a hang.
int replay() {
  // Small kernel buffers: the socket holds far less than the reduce. Sockets from stage 5 on
  // too (two ranks of one process would otherwise use SHM, which has no proxy). One ring
  // channel and the ring algorithm, so the warm-up makes every connector the replay uses.
  setenv("TCCL_SOCKET_BUFFER", "65536", 1);
  setenv("TCCL_SHM_DISABLE", "1", 1);
  setenv("TCCL_MIN_NCHANNELS", "1", 1);
  setenv("TCCL_MAX_NCHANNELS", "1", 1);
  setenv("TCCL_ALGO", "ring", 1);
  tcclComm_t x[2], r[2];
  const std::vector<int> devs = tccl_test::threadRankDevices(2);
  if (tcclCommInitAll(x, 2, tccl_test::devlistOrNull(devs)) != tcclSuccess) return 10;
  if (tcclCommInitAll(r, 2, tccl_test::devlistOrNull(devs)) != tcclSuccess) return 11;

  int32_t xval = 0;
  // Warm-up: the same connectors, in an order that leaves nothing behind (one step each).
  auto warm = [&](int rank) {
    tcclResult_t res = tcclSuccess;
    std::vector<int32_t> mine(1, 1), res1(1);
    int32_t v = 7;
    if (rank == kA) {
      res = tcclRecv(&v, 1, tcclInt32, kB, x[kA], nullptr);
    } else {
      res = tcclSend(&v, 1, tcclInt32, kA, x[kB], nullptr);
    }
    if (res == tcclSuccess) {
      res = tcclReduce(mine.data(), res1.data(), 1, tcclInt32, tcclAvg, kB, r[rank], nullptr);
    }
    return res;
  };
  tcclResult_t wa = tcclSuccess, wb = tcclSuccess;
  {
    std::thread ta([&] { wa = warm(kA); });
    std::thread tb([&] { wb = warm(kB); });
    ta.join();
    tb.join();
  }
  if (wa != tcclSuccess || wb != tcclSuccess) return 12;

  const std::vector<uint64_t> base = sendTails(r[kA], kB);
  if (base.empty()) return 13;  // the warm-up made no send connector from A to B on R
  std::vector<int32_t> inA(kCount, 2), inB(kCount, 4), outA(kCount), outB(kCount, -1);
  tcclResult_t ra = tcclSuccess, rb = tcclSuccess;
  bool gated = false;
  std::thread ta([&] {
    if (tcclGroupStart() != tcclSuccess) ra = tcclInternalError;
    // X first: the calling thread collects X's batch before R's (group_launch.cc).
    if (ra == tcclSuccess) ra = tcclRecv(&xval, 1, tcclInt32, kB, x[kA], nullptr);
    if (ra == tcclSuccess) {
      ra = tcclReduce(inA.data(), outA.data(), kCount, tcclInt32, tcclAvg, kB, r[kA], nullptr);
    }
    tcclResult_t g = tcclGroupEnd();
    if (ra == tcclSuccess) ra = g;
  });
  std::thread tb([&] {
    // The fixed order: every step of A's reduce is published (its item posts them without
    // waiting: they fit in the FIFO), and then A's worker has returned from its last post --
    // a pass that finds the socket full -- within the grace below. Only then does B start
    // reading, so the steps the sockets could not take are the ones left in A's FIFO.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (publishedBytes(r[kA], kB, base) < kCount * sizeof(int32_t) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    gated = publishedBytes(r[kA], kB, base) == kCount * sizeof(int32_t);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    rb = tcclReduce(inB.data(), outB.data(), kCount, tcclInt32, tcclAvg, kB, r[kB], nullptr);
    int32_t v = 42;
    if (rb == tcclSuccess) rb = tcclSend(&v, 1, tcclInt32, kA, x[kB], nullptr);
  });
  ta.join();
  tb.join();
  if (!gated) return 14;
  if (ra != tcclSuccess || rb != tcclSuccess) return 15;
  if (xval != 42) return 16;
  for (size_t i = 0; i < kCount; i++) {
    if (outB[i] != 3) return 17;  // avg(2, 4)
  }
  for (tcclComm_t c : {x[0], x[1], r[0], r[1]}) tcclCommDestroy(c);
  return 0;
}

TEST(EngineHandoff, SendsLeftByAFinishedItemAreSentWhileTheCallerWaitsElsewhere) {
  Child child(replay);
  ASSERT_TRUE(child.started());
  const ChildEnd end = child.wait(kChildSeconds);
  EXPECT_TRUE(end.exited && end.code == 0)
      << "the replay " << end.describe()
      << (end.timedOut ? ": rank 0's reduce left steps in its send FIFO that nobody sent (its "
                         "item had returned, the proxy thread was parked, the caller was "
                         "waiting for the other communicator's batch)"
                       : "")
      << " (codes: 10-13 setup, 14 rank 0 never published its reduce, 15 a call failed, "
         "16-17 wrong data)";
}

}  // namespace
