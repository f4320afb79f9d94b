/*
 * tests/net/net_fake_ib_test.cc: collectives over NET/IB, with the fake verbs device standing
 * in for libibverbs (fake_verbs_lib.cc), every rank a thread of one process.
 *
 * What it is: the IB Net as the library really uses it -- the transport list picking NET/IB,
 * connect in phases, FIFO steps as RDMA writes with immediate, ready-to-receive entries -- on a
 * machine with no RDMA device (CI's; the GPU machines'). CTest runs it with LD_LIBRARY_PATH
 * naming the fake's directory, TCCL_SHM_DISABLE=1 and TCCL_P2P_DISABLE=1 (so every connector
 * is a network one) and TCCL_IB_GID_INDEX=3. On a GPU it also runs the GPUDirect RDMA path
 * (TCCL_NET_GDR_ENABLE=1, FAKE_VERBS_DMABUF=1): kernels' receive slots in GPU memory,
 * exported as a dma-buf, registered with ibv_reg_dmabuf_mr, written by the fake "NIC" with a
 * CUDA copy, flushed before the kernel reads them.
 *
 * Each case checks the data exactly (integers) or within the harness's tolerance, and the
 * fake's counters say the bytes really took that path: QPs were created (NET/IB, not
 * NET/Socket), and dma-buf regions were registered exactly when device buffers were used.
 *
 * Invariants: 2 and 3 ranks, threads of one MPI process (run at NP 1); each rank has its own
 * non-blocking stream (two ranks' kernels on one stream would wait for each other forever);
 * device memory is allocated before and freed after every rank's collectives, behind a
 * barrier of the threads: cudaFree waits for the whole device, so a rank freeing while
 * another's kernel waits for it would deadlock (NCCL's docs warn of the same with several
 * ranks per process).
 *
 * NCCL counterpart: none (NCCL's IB path is tested on hardware).
 * Added in: stage 6.
 */
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tccl.h"
#include "tccl_test/harness.h"

#if TCCL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tccl {
namespace test {
namespace {

struct Counters {
  int qps = -1;
  int dmabufMrs = -1;
};

/// What the fake libibverbs has seen; qps -1 when tccl did not load the fake at all.
Counters fakeCounters() {
  Counters c;
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return c;
  auto fn = reinterpret_cast<void (*)(int*, int*)>(dlsym(lib, "fake_verbs_counters"));
  if (fn != nullptr) fn(&c.qps, &c.dmabufMrs);
  dlclose(lib);
  return c;
}

/// The ranks' threads meet here (C++17 has no std::barrier).
class ThreadBarrier {
 public:
  explicit ThreadBarrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    const uint64_t gen = gen_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      gen_++;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return gen_ != gen; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, arrived_ = 0;
  uint64_t gen_ = 0;
};

/// One rank's buffers, made before and freed after all its collectives (see the top).
struct RankBuffers {
  RankBuffers(size_t bytes, int n, MemKind kind) : send(bytes, kind), recv(bytes * size_t(n), kind) {}
  Buffer send, recv;
};

/// Runs body(rank, comm, stream, buffers) on `n` threads, one communicator each, and
/// destroys them.
template <typename Body>
void runRanks(int n, MemKind kind, size_t bytes, Body body) {
  ThreadBarrier barrier(n);
  tcclUniqueId id;
  ASSERT_EQ(tcclGetUniqueId(&id), tcclSuccess);
  int dev = -1;
#if TCCL_HAVE_CUDA
  if (haveGpu()) cudaGetDevice(&dev);
#endif
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++) {
    threads.emplace_back([&, r] {
      void* stream = nullptr;
#if TCCL_HAVE_CUDA
      if (dev >= 0) {
        cudaSetDevice(dev);
        cudaStream_t s = nullptr;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        stream = s;
      }
#endif
      tcclComm_t comm = nullptr;
      if (tcclCommInitRank(&comm, n, id, r) != tcclSuccess) {
        errors[size_t(r)] = "tcclCommInitRank failed";  // (the others fail their init too)
        return;
      }
      {
        RankBuffers buffers(bytes, n, kind);
        barrier.wait();  // every rank's memory is there before any kernel runs
        errors[size_t(r)] = body(r, comm, static_cast<cudaStream_t>(stream), buffers);
        barrier.wait();  // every rank's work is done before any cudaFree
      }
      tcclCommDestroy(comm);
#if TCCL_HAVE_CUDA
      if (stream) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
#endif
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; r++) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
}

std::string waitFor(cudaStream_t s) {
#if TCCL_HAVE_CUDA
  if (s != nullptr && cudaStreamSynchronize(s) != cudaSuccess) return "cudaStreamSynchronize";
#endif
  (void)s;
  return "";
}

/// All-reduce (sum, float32) of `count` elements, out of place or in place.
std::string allReduceCase(int r, int n, tcclComm_t comm, cudaStream_t s, RankBuffers& b,
                          size_t count, bool inPlace) {
  const DType t = DType::kFloat32;
  const size_t bytes = count * dtypeSize(t);
  std::vector<char> in(bytes + 4), want(bytes + 4), got(bytes + 4);
  fillInput(in.data(), count, t, r, 11);
  referenceReduce(want.data(), count, t, RedOp::kSum, n, 11);
  Buffer& send = b.send;
  Buffer& recv = b.recv;
  send.upload(in.data(), bytes);
  recv.poison();
  void* out = inPlace ? send.data() : recv.data();
  if (tcclAllReduce(send.data(), out, count, tcclFloat32, tcclSum, comm, s) != tcclSuccess) {
    return "tcclAllReduce failed";
  }
  std::string e = waitFor(s);
  if (!e.empty()) return e;
  (inPlace ? send : recv).download(got.data(), bytes);
  std::string why;
  if (!compare(got.data(), want.data(), count, t, tolerance(t, RedOp::kSum, n), &why)) {
    return "all-reduce of " + std::to_string(count) + (inPlace ? " in place" : "") + ": " + why;
  }
  return "";
}

/// All-gather of `count` int32 per rank, and a broadcast of as many from the last rank.
std::string gatherAndBroadcast(int r, int n, tcclComm_t comm, cudaStream_t s, RankBuffers& b,
                               size_t count) {
  const DType t = DType::kInt32;
  const size_t bytes = count * dtypeSize(t);
  std::vector<char> mine(bytes), got(bytes * size_t(n)), want(bytes * size_t(n));
  fillInput(mine.data(), count, t, r, 5);
  for (int p = 0; p < n; p++) fillInput(want.data() + size_t(p) * bytes, count, t, p, 5);
  Buffer& send = b.send;
  Buffer& recv = b.recv;
  send.upload(mine.data(), bytes);
  recv.poison();
  if (tcclAllGather(send.data(), recv.data(), count, tcclInt32, comm, s) != tcclSuccess) {
    return "tcclAllGather failed";
  }
  std::string e = waitFor(s);
  if (!e.empty()) return e;
  recv.download(got.data(), got.size());
  if (memcmp(got.data(), want.data(), got.size()) != 0) return "all-gather: wrong data";
  // Broadcast from the last rank, in place.
  const int root = n - 1;
  if (tcclBroadcast(send.data(), send.data(), count, tcclInt32, root, comm, s) != tcclSuccess) {
    return "tcclBroadcast failed";
  }
  e = waitFor(s);
  if (!e.empty()) return e;
  send.download(mine.data(), bytes);
  if (memcmp(mine.data(), want.data() + size_t(root) * bytes, bytes) != 0) {
    return "broadcast: wrong data";
  }
  return "";
}

class NetFakeIb : public ::testing::TestWithParam<int> {};

TEST_P(NetFakeIb, CollectivesOverTheFakeVerbsDevice) {
  const int n = GetParam();
  for (MemKind kind : memKinds()) {
    SCOPED_TRACE(memKindName(kind));
    Counters before = fakeCounters();  // (-1 before tccl's first use opens the library)
    before.qps = std::max(before.qps, 0);
    before.dmabufMrs = std::max(before.dmabufMrs, 0);
    constexpr size_t kMaxCount = 300001;
    runRanks(n, kind, kMaxCount * 4 + 4,
             [&](int r, tcclComm_t comm, cudaStream_t s, RankBuffers& b) -> std::string {
      // 0 and 1 element, fewer than ranks, one step, and several 512 KiB steps (not divisible).
      for (size_t count : {size_t(0), size_t(1), size_t(2), size_t(100000), kMaxCount}) {
        std::string e = allReduceCase(r, n, comm, s, b, count, /*inPlace=*/false);
        if (!e.empty()) return e;
      }
      std::string e = allReduceCase(r, n, comm, s, b, kMaxCount, /*inPlace=*/true);
      if (!e.empty()) return e;
      return gatherAndBroadcast(r, n, comm, s, b, 70001);
    });
    const Counters after = fakeCounters();
    ASSERT_GE(after.qps, 0) << "tccl did not open the fake libibverbs.so.1 (LD_LIBRARY_PATH?)";
    // NET/IB carried the data: each rank's connections made QPs (not NET/Socket).
    EXPECT_GT(after.qps, before.qps);
    // GPUDirect RDMA exactly for kernels' connectors, when asked for.
    const char* gdr = getenv("TCCL_NET_GDR_ENABLE");
    const bool wantGdr = kind == MemKind::kDevice && gdr != nullptr && strcmp(gdr, "1") == 0;
    if (wantGdr) {
      EXPECT_GT(after.dmabufMrs, before.dmabufMrs) << "no receive slot was registered by dma-buf";
    } else {
      EXPECT_EQ(after.dmabufMrs, before.dmabufMrs);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, NetFakeIb, ::testing::Values(2, 3));

}  // namespace
}  // namespace test
}  // namespace tccl
