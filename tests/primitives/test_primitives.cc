/*
 * tests/primitives/test_primitives.cc: unit tests of the primitives on the host backend.
 *
 * What it is: the primitives without a communicator, a transport or a proxy. Three or four
 * threads form a little pipeline over FIFOs in plain memory, the consumer reading the
 * producer's FIFO directly:
 *
 *     A: send / copySend  --fifo1-->  B: recvCopySend / recvReduceSend /  --fifo2-->  C: recv
 *                                        recvReduceCopySend
 *
 * and each stage's output is compared with what the primitive promises. Sizes cover zero, one
 * element, less than a step, exactly a step, more steps than the FIFO has slots, and a
 * remainder; a size mismatch between sender and receiver must be reported, not hang.
 *
 * The copying primitives (send, recv, copySend, recvCopySend) are tested in every stage; the
 * reducing ones (recvReduce*), and the functor argument of Primitives that comes with them,
 * exist from stage 2 on (TCCL_STAGE, from the stage's tccl.h), so their cases are compiled
 * from stage 2 on.
 *
 * Added in: stage 1.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <thread>
#include <vector>

#include "device/primitives.h"
#include "host_backend.h"
#include "tccl.h"
#if TCCL_STAGE >= 2
#include "device/reduce_op.h"
#endif

namespace tccl {

// A failed comparison shows the status by its number (work.h lists them): an enum class has
// no operator<< for GoogleTest to use, which would otherwise print its raw bytes.
void PrintTo(WorkStatus s, std::ostream* os) { *os << "WorkStatus " << uint32_t(s); }

namespace {

struct NoKick : Kickable {
  void kick() override {}
};

/// A FIFO in plain host memory, shared by a producer and a consumer thread.
struct TestFifo {
  explicit TestFifo(size_t stepBytes) : slots(kNSteps * stepBytes) {
    info.buff = slots.data();
    info.fifo = &fifo;
    info.stepBytes = stepBytes;
    info.step = 0;
  }
  ConnFifo fifo{};
  std::vector<char> slots;
  ConnInfo info{};
};

class PrimitivesTest : public ::testing::TestWithParam<size_t> {
 protected:
  // Consumers read the producer's FIFO directly, so both sides use the same ConnInfo; each
  // side keeps its own step in its own Primitives object, and writes it back in finish().
  ProgressSignal signal;
  NoKick noKick;
  volatile uint32_t abortFlag = 0;
  HostBackend backend() { return HostBackend{&abortFlag, &signal, &noKick}; }
};

#if TCCL_STAGE >= 2
using Prims = Primitives<int64_t, FuncSum<int64_t>, HostBackend>;
#else
using Prims = Primitives<int64_t, HostBackend>;
#endif

std::vector<int64_t> iota(size_t n, int64_t base) {
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = base + int64_t(i);
  return v;
}

TEST_P(PrimitivesTest, SendRecvCopySendRecv) {
  const size_t n = GetParam();
  const size_t stepBytes = 64 * sizeof(int64_t);  // small steps: many FIFO wrap-arounds
  TestFifo f1(stepBytes), f2(stepBytes);
  ConnInfo sendSide1 = f1.info, recvSide1 = f1.info, sendSide2 = f2.info, recvSide2 = f2.info;
  auto a = iota(n, 1000);
  std::vector<int64_t> bMid(n, -1), out(n, -1);
  std::thread ta([&] {
    HostBackend be = backend();
    Prims p(be, nullptr, &sendSide1);
    EXPECT_TRUE(p.send(a.data(), n));
    EXPECT_EQ(p.finish(), WorkStatus::kOk);
  });
  std::thread tb([&] {
    HostBackend be = backend();
    Prims p(be, &recvSide1, &sendSide2);
    EXPECT_TRUE(p.recvCopySend(bMid.data(), n));  // keep a copy, pass it on
    EXPECT_EQ(p.finish(), WorkStatus::kOk);
  });
  std::thread tc([&] {
    HostBackend be = backend();
    Prims p(be, &recvSide2, nullptr);
    EXPECT_TRUE(p.recv(out.data(), n));
    EXPECT_EQ(p.finish(), WorkStatus::kOk);
  });
  ta.join();
  tb.join();
  tc.join();
  for (size_t i = 0; i < n; i++) {
    ASSERT_EQ(bMid[i], a[i]) << "element " << i;
    ASSERT_EQ(out[i], a[i]) << "element " << i;
  }
  // Every step was produced and consumed on both FIFOs: the counters agree and persist in
  // ConnInfo.
  const uint64_t steps = (n * sizeof(int64_t) + stepBytes - 1) / stepBytes;
  EXPECT_EQ(f1.fifo.tail, steps);
  EXPECT_EQ(f1.fifo.head, steps);
  EXPECT_EQ(f2.fifo.tail, steps);
  EXPECT_EQ(f2.fifo.head, steps);
  EXPECT_EQ(sendSide1.step, steps);
  EXPECT_EQ(recvSide1.step, steps);
  EXPECT_EQ(sendSide2.step, steps);
  EXPECT_EQ(recvSide2.step, steps);
}

TEST_P(PrimitivesTest, CopySendRecvTwice) {
  const size_t n = GetParam();
  const size_t stepBytes = 48 * sizeof(int64_t);
  TestFifo f(stepBytes);
  ConnInfo s = f.info, r = f.info;
  auto a = iota(n, 5), b = iota(n, 100);
  std::vector<int64_t> aCopy(n, -1), out1(n, -1), out2(n, -1);
  // Two operations on one connection: the second continues at the step where finish() left
  // the first, and copySend in place (dst == src) leaves its input as it was.
  std::thread producer([&] {
    HostBackend be = backend();
    Prims p1(be, nullptr, &s);
    EXPECT_TRUE(p1.copySend(a.data(), aCopy.data(), n));
    EXPECT_EQ(p1.finish(), WorkStatus::kOk);
    Prims p2(be, nullptr, &s);
    EXPECT_TRUE(p2.copySend(b.data(), b.data(), n));
    EXPECT_EQ(p2.finish(), WorkStatus::kOk);
  });
  HostBackend be = backend();
  Prims p1(be, &r, nullptr);
  EXPECT_TRUE(p1.recv(out1.data(), n));
  EXPECT_EQ(p1.finish(), WorkStatus::kOk);
  Prims p2(be, &r, nullptr);
  EXPECT_TRUE(p2.recv(out2.data(), n));
  EXPECT_EQ(p2.finish(), WorkStatus::kOk);
  producer.join();
  for (size_t i = 0; i < n; i++) {
    ASSERT_EQ(aCopy[i], a[i]) << "element " << i;
    ASSERT_EQ(out1[i], a[i]) << "element " << i;
    ASSERT_EQ(b[i], int64_t(100 + i)) << "element " << i;
    ASSERT_EQ(out2[i], b[i]) << "element " << i;
  }
  const uint64_t steps = 2 * ((n * sizeof(int64_t) + stepBytes - 1) / stepBytes);
  EXPECT_EQ(s.step, steps);
  EXPECT_EQ(r.step, steps);
}

#if TCCL_STAGE >= 2
TEST_P(PrimitivesTest, SendRecvReduceSendRecv) {
  const size_t n = GetParam();
  const size_t stepBytes = 64 * sizeof(int64_t);  // small steps: many FIFO wrap-arounds
  TestFifo f1(stepBytes), f2(stepBytes);
  ConnInfo sendSide1 = f1.info, recvSide1 = f1.info, sendSide2 = f2.info, recvSide2 = f2.info;
  auto a = iota(n, 1000), b = iota(n, 7), out(std::vector<int64_t>(n, -1));
  std::thread ta([&] {
    HostBackend be = backend();
    Prims p(be, nullptr, &sendSide1);
    EXPECT_TRUE(p.send(a.data(), n));
    EXPECT_EQ(p.finish(), WorkStatus::kOk);
  });
  std::thread tb([&] {
    HostBackend be = backend();
    Prims p(be, &recvSide1, &sendSide2);
    EXPECT_TRUE(p.recvReduceSend(b.data(), n));  // a + b goes on
    EXPECT_EQ(p.finish(), WorkStatus::kOk);
  });
  std::thread tc([&] {
    HostBackend be = backend();
    Prims p(be, &recvSide2, nullptr);
    EXPECT_TRUE(p.recv(out.data(), n));
    EXPECT_EQ(p.finish(), WorkStatus::kOk);
  });
  ta.join();
  tb.join();
  tc.join();
  for (size_t i = 0; i < n; i++) ASSERT_EQ(out[i], a[i] + b[i]) << "element " << i;
  // Every step was produced and consumed: the counters agree and persist in ConnInfo.
  const uint64_t steps = (n * sizeof(int64_t) + stepBytes - 1) / stepBytes;
  EXPECT_EQ(f1.fifo.tail, steps);
  EXPECT_EQ(f1.fifo.head, steps);
  EXPECT_EQ(sendSide1.step, steps);
  EXPECT_EQ(recvSide2.step, steps);
}

TEST_P(PrimitivesTest, CopySendRecvCopySendRecvReduceCopySend) {
  const size_t n = GetParam();
  const size_t stepBytes = 48 * sizeof(int64_t);
  TestFifo f1(stepBytes), f2(stepBytes), f3(stepBytes);
  ConnInfo s1 = f1.info, r1 = f1.info, s2 = f2.info, r2 = f2.info, s3 = f3.info, r3 = f3.info;
  auto a = iota(n, 5), b = iota(n, 100);
  std::vector<int64_t> aCopy(n, -1), bMid(n, -1), cOut(n, -1), dOut(n, -1);
  std::vector<std::thread> t;
  t.emplace_back([&] {  // A: copySend -- a to its own output and to B
    HostBackend be = backend();
    Prims p(be, nullptr, &s1);
    EXPECT_TRUE(p.copySend(a.data(), aCopy.data(), n));
    p.finish();
  });
  t.emplace_back([&] {  // B: recvCopySend -- forward A's data, keeping a copy
    HostBackend be = backend();
    Prims p(be, &r1, &s2);
    EXPECT_TRUE(p.recvCopySend(bMid.data(), n));
    p.finish();
  });
  t.emplace_back([&] {  // C: recvReduceCopySend -- a + b to its output and on to D
    HostBackend be = backend();
    Prims p(be, &r2, &s3);
    EXPECT_TRUE(p.recvReduceCopySend(b.data(), cOut.data(), n));
    p.finish();
  });
  t.emplace_back([&] {  // D: recvReduceCopy -- (a + b) + b
    HostBackend be = backend();
    Prims p(be, &r3, nullptr);
    EXPECT_TRUE(p.recvReduceCopy(b.data(), dOut.data(), n));
    p.finish();
  });
  for (auto& th : t) th.join();
  for (size_t i = 0; i < n; i++) {
    ASSERT_EQ(aCopy[i], a[i]);
    ASSERT_EQ(bMid[i], a[i]);
    ASSERT_EQ(cOut[i], a[i] + b[i]);
    ASSERT_EQ(dOut[i], a[i] + 2 * b[i]);
  }
}
#endif  // TCCL_STAGE >= 2

INSTANTIATE_TEST_SUITE_P(Sizes, PrimitivesTest,
                         ::testing::Values(0, 1, 63, 64, 65, 64 * 8, 64 * 8 + 1, 100003));

TEST(PrimitivesErrors, SizeMismatchIsReported) {
  ProgressSignal signal;
  NoKick noKick;
  volatile uint32_t abortFlag = 0;
  TestFifo f(256);
  ConnInfo s = f.info, r = f.info;
  std::vector<int64_t> a(10, 1), out(12, 0);
  std::thread producer([&] {
    HostBackend be{&abortFlag, &signal, &noKick};
    Prims p(be, nullptr, &s);
    p.send(a.data(), 10);  // 80 bytes
    p.finish();
  });
  HostBackend be{&abortFlag, &signal, &noKick};
  Prims p(be, &r, nullptr);
  EXPECT_FALSE(p.recv(out.data(), 12));  // expects 96 bytes
  EXPECT_EQ(p.finish(), WorkStatus::kSizeMismatch);
  producer.join();
}

TEST(PrimitivesErrors, AbortReleasesAWaitingReceiver) {
  ProgressSignal signal;
  NoKick noKick;
  volatile uint32_t abortFlag = 0;
  TestFifo f(256);
  ConnInfo r = f.info;
  std::vector<int64_t> out(4);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    // Nothing will ever be sent: only the abort can release the receiver. Atomic, as the
    // library raises it (another thread reads it).
    __atomic_store_n(&abortFlag, 1u, __ATOMIC_RELEASE);
    signal.notify();
  });
  HostBackend be{&abortFlag, &signal, &noKick};
  Prims p(be, &r, nullptr);
  EXPECT_FALSE(p.recv(out.data(), 4));
  EXPECT_EQ(p.finish(), WorkStatus::kAborted);
  aborter.join();
}

TEST(PrimitivesErrors, PeerClosedReleasesAWaitingReceiver) {
  ProgressSignal signal;
  NoKick noKick;
  volatile uint32_t abortFlag = 0;
  TestFifo f(256);
  ConnInfo r = f.info;
  std::vector<int64_t> out(4);
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    __atomic_store_n(&f.fifo.closed, 1u, __ATOMIC_RELEASE);
    signal.notify();
  });
  HostBackend be{&abortFlag, &signal, &noKick};
  Prims p(be, &r, nullptr);
  EXPECT_FALSE(p.recv(out.data(), 4));
  EXPECT_EQ(p.finish(), WorkStatus::kPeerClosed);
  closer.join();
}

}  // namespace
}  // namespace tccl
