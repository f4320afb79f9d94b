/*
 * tests/gpu/cuda_graph_test.cc: collectives captured in a CUDA graph, then replayed.
 *
 * What it checks (device buffers; every case is skipped on a machine without a GPU, such as
 * CI's -- tools/gpu/stage5.sh runs it on the GPU machine):
 *  - Replay: one graph holding an all-reduce, an all-gather and a ring exchange of send/recv
 *    (a group), captured after one warm-up call has set up the connections, then replayed
 *    100 times. Before each replay new inputs are copied in (outside the graph); after it the
 *    outputs are compared with the CPU reference. So every replay ran, on the data of its own
 *    time, and the FIFOs' step counters stayed in lockstep across replays.
 *  - After the replays, the same calls outside any graph, on the same communicator, are right:
 *    the events that order a communicator's launches were left alone inside the capture.
 *  - Capture first: a new communicator whose very first call is captured (the connections are
 *    made inside the capture, in relaxed capture mode), replayed 3 times.
 *  - Host buffers inside a capture are refused with tcclInvalidUsage, and the capture is still
 *    valid afterwards (the call touched nothing).
 *
 * NCCL counterpart: nccl-tests' -G option (graph replays of each benchmark).
 * Added in: stage 5.
 */
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "../ring/ring_case.h"  // initWorldComm
#include "tccl.h"
#include "tccl_test/harness.h"

#if TCCL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tccl {
namespace test {
namespace {

#if TCCL_HAVE_CUDA

using ring::initWorldComm;

// Evaluates `call` once; on failure the message names the call and CUDA's error string.
#define CUDA_OK(call)                                                  \
  do {                                                                 \
    const cudaError_t err_ = (call);                                   \
    ASSERT_EQ(err_, cudaSuccess) << #call << ": " << cudaGetErrorString(err_); \
  } while (0)

/// The captured work and its buffers: all-reduce of n floats, all-gather of m int32 per
/// rank, and a send of n floats to the next rank with a receive from the previous one.
class GraphWork {
 public:
  GraphWork(size_t n, size_t m) : n_(n), m_(m), nranks_(worldSize()), rank_(worldRank()) {
    cudaMalloc(&arIn_, n_ * 4);
    cudaMalloc(&arOut_, n_ * 4);
    cudaMalloc(&agIn_, m_ * 4);
    cudaMalloc(&agOut_, m_ * 4 * size_t(nranks_));
    cudaMalloc(&rx_, n_ * 4);
  }
  ~GraphWork() {
    for (void* p : {arIn_, arOut_, agIn_, agOut_, rx_}) cudaFree(p);
  }

  /// Enqueues the three operations on `s` (captured or not).
  tcclResult_t issue(tcclComm_t comm, cudaStream_t s) const {
    tcclResult_t r = tcclAllReduce(arIn_, arOut_, n_, tcclFloat32, tcclSum, comm, s);
    if (r != tcclSuccess) return r;
    r = tcclAllGather(agIn_, agOut_, m_, tcclInt32, comm, s);
    if (r != tcclSuccess) return r;
    const int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
    tcclGroupStart();
    tcclSend(arIn_, n_, tcclFloat32, next, comm, s);
    tcclRecv(rx_, n_, tcclFloat32, prev, comm, s);
    return tcclGroupEnd();
  }

  /// Copies the inputs of `seed` in, on `s` (before the graph's launch, outside it).
  void upload(int seed, cudaStream_t s) {
    hostAr_.resize(n_);
    hostAg_.resize(m_);
    fillInput(hostAr_.data(), n_, DType::kFloat32, rank_, seed);
    fillInput(hostAg_.data(), m_, DType::kInt32, rank_, seed);
    cudaMemcpyAsync(arIn_, hostAr_.data(), n_ * 4, cudaMemcpyHostToDevice, s);
    cudaMemcpyAsync(agIn_, hostAg_.data(), m_ * 4, cudaMemcpyHostToDevice, s);
    // Poison the outputs: a replay that did not run leaves the poison, which never matches.
    cudaMemsetAsync(arOut_, 0xff, n_ * 4, s);
    cudaMemsetAsync(agOut_, 0xff, m_ * 4 * size_t(nranks_), s);
    cudaMemsetAsync(rx_, 0xff, n_ * 4, s);
  }

  /// Waits for `s`, then compares the three outputs with the references for `seed`.
  bool check(int seed, cudaStream_t s, std::string* why) const {
    if (cudaStreamSynchronize(s) != cudaSuccess) {
      *why = "cudaStreamSynchronize failed";
      return false;
    }
    std::vector<float> got(n_), want(n_);
    cudaMemcpy(got.data(), arOut_, n_ * 4, cudaMemcpyDeviceToHost);
    referenceReduce(want.data(), n_, DType::kFloat32, RedOp::kSum, nranks_, seed);
    const double tol = tolerance(DType::kFloat32, RedOp::kSum, nranks_);
    if (!compare(got.data(), want.data(), n_, DType::kFloat32, tol, why)) {
      *why = "all-reduce: " + *why;
      return false;
    }
    std::vector<int32_t> gathered(m_ * size_t(nranks_)), block(m_);
    cudaMemcpy(gathered.data(), agOut_, gathered.size() * 4, cudaMemcpyDeviceToHost);
    for (int r = 0; r < nranks_; r++) {
      fillInput(block.data(), m_, DType::kInt32, r, seed);
      if (!compare(gathered.data() + size_t(r) * m_, block.data(), m_, DType::kInt32, 0, why)) {
        *why = "all-gather block " + std::to_string(r) + ": " + *why;
        return false;
      }
    }
    const int prev = (rank_ + nranks_ - 1) % nranks_;
    fillInput(want.data(), n_, DType::kFloat32, prev, seed);
    cudaMemcpy(got.data(), rx_, n_ * 4, cudaMemcpyDeviceToHost);
    if (!compare(got.data(), want.data(), n_, DType::kFloat32, 0, why)) {
      *why = "receive from rank " + std::to_string(prev) + ": " + *why;
      return false;
    }
    return true;
  }

 private:
  size_t n_, m_;
  int nranks_, rank_;
  void *arIn_ = nullptr, *arOut_ = nullptr, *agIn_ = nullptr, *agOut_ = nullptr,
       *rx_ = nullptr;
  std::vector<float> hostAr_;
  std::vector<int32_t> hostAg_;
};

/// Captures work.issue() on `s` into an executable graph.
void capture(const GraphWork& work, tcclComm_t comm, cudaStream_t s, cudaGraphExec_t* exec) {
  cudaGraph_t graph = nullptr;
  // Global mode, as PyTorch captures: the strictest, where tccl must switch to relaxed mode
  // itself for whatever setup it does inside the capture.
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  const tcclResult_t r = work.issue(comm, s);
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  ASSERT_EQ(r, tcclSuccess) << tcclGetLastError(comm);
  CUDA_OK(cudaGraphInstantiate(exec, graph, 0));
  cudaGraphDestroy(graph);
}

class CudaGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!haveGpu()) GTEST_SKIP() << "no GPU: CUDA graphs are tested on the GPU machine";
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaGraph, ReplayedHundredTimes) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorldComm(&comm), tcclSuccess);
  for (size_t n : {size_t(1), size_t(1000), size_t(1) << 20}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    GraphWork work(n, n / 2 + 1);
    std::string why;
    // Warm-up, outside any graph: connects whatever these sizes need.
    work.upload(1, stream_);
    ASSERT_EQ(work.issue(comm, stream_), tcclSuccess);
    ASSERT_TRUE(work.check(1, stream_, &why)) << why;
    cudaGraphExec_t exec = nullptr;
    capture(work, comm, stream_, &exec);
    ASSERT_NE(exec, nullptr);
    bool ok = true;
    for (int replay = 0; replay < 100 && ok; replay++) {
      work.upload(100 + replay, stream_);
      CUDA_OK(cudaGraphLaunch(exec, stream_));
      ok = work.check(100 + replay, stream_, &why);
      EXPECT_TRUE(ok) << "replay " << replay << ": " << why;
    }
    cudaGraphExecDestroy(exec);
    // And outside a graph again, on the same communicator.
    work.upload(7, stream_);
    ASSERT_EQ(work.issue(comm, stream_), tcclSuccess);
    EXPECT_TRUE(work.check(7, stream_, &why)) << "after the replays: " << why;
    ASSERT_TRUE(allRanksOk(ok));
  }
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

TEST_F(CudaGraph, FirstCallCaptured) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorldComm(&comm), tcclSuccess);
  GraphWork work(4096, 100);
  cudaGraphExec_t exec = nullptr;
  capture(work, comm, stream_, &exec);  // connections are made inside the capture
  ASSERT_NE(exec, nullptr);
  std::string why;
  for (int replay = 0; replay < 3; replay++) {
    work.upload(replay, stream_);
    CUDA_OK(cudaGraphLaunch(exec, stream_));
    EXPECT_TRUE(work.check(replay, stream_, &why)) << "replay " << replay << ": " << why;
  }
  cudaGraphExecDestroy(exec);
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

TEST_F(CudaGraph, HostBuffersAreRefused) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorldComm(&comm), tcclSuccess);
  std::vector<float> in(64, 1.0f), out(64, 0.0f);
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  const tcclResult_t r =
      tcclAllReduce(in.data(), out.data(), in.size(), tcclFloat32, tcclSum, comm, stream_);
  // The capture is still whole: the refused call enqueued nothing.
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(r, tcclInvalidUsage);
  EXPECT_NE(std::string(tcclGetLastError(comm)).find("graph"), std::string::npos)
      << tcclGetLastError(comm);
  if (graph != nullptr) cudaGraphDestroy(graph);
  // The communicator still works (nothing was half-started on any rank).
  EXPECT_EQ(tcclAllReduce(in.data(), out.data(), in.size(), tcclFloat32, tcclSum, comm, stream_),
            tcclSuccess);
  EXPECT_EQ(out[0], float(worldSize()));
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

#else  // built without CUDA: nothing to capture

TEST(CudaGraph, NeedsCuda) { GTEST_SKIP() << "this build has no CUDA"; }

#endif

}  // namespace
}  // namespace test
}  // namespace tccl
