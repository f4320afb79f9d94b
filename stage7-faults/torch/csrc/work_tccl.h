/**
 * work_tccl.h: the Work object one collective call returns, and its Future.
 *
 * What it is: torch's handle on an operation in flight. The caller holds it (async_op=True),
 * torch holds it for a blocking call (then waits on it at once), and DDP holds its Future
 * (getFuture) to chain the next step of a gradient bucket onto the all-reduce.
 *
 * The contract, as ProcessGroupNCCL's WorkNCCL keeps it:
 *  - Host (CPU) tensors: the operation is done when the backend's worker thread has returned
 *    from the tccl call. complete() then marks the Future with the output tensors and wakes
 *    wait(). isCompleted() is true from then on.
 *  - CUDA tensors: the worker thread only enqueues (tccl device calls are asynchronous) and
 *    records `end` on the backend's stream. complete() is called after that enqueue; the
 *    Future is marked inside a guard that makes the backend's stream current, so the Future
 *    records its own event there and every consumer (then(), value(), wait()) waits for the
 *    GPU. wait() never blocks the host on the GPU: it makes the caller's current stream wait
 *    on `end` (synchronize). isCompleted() asks `end` whether the GPU got there.
 *  - Failure: fail() stores the exception in the Work and in the Future; wait(), value() and
 *    every then() raise it. The first of complete()/fail() wins: the watchdog may fail a Work
 *    whose tccl call returns later (OpQueue), and that late result is dropped.
 *  - The Work keeps its input and output tensors alive until it is destroyed, and (CUDA) the
 *    backend stream is recorded on their storage, so the caching allocator never hands their
 *    memory to another kernel while the collective may still read or write it.
 * NCCL counterpart: ProcessGroupNCCL::WorkNCCL (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp).
 * Added in: stage 4.
 */
#ifndef TCCL_TORCH_WORK_TCCL_H_
#define TCCL_TORCH_WORK_TCCL_H_

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "torch_compat.h"

namespace tccl_torch {

class WorkTccl : public c10d::Work {
 public:
  /// `outputs` is what result() and the Future return; `device` decides CPU or CUDA semantics.
  WorkTccl(int rank, c10d::OpType type, std::string name, uint64_t seq,
           std::vector<at::Tensor> outputs, at::Device device);
  ~WorkTccl() override;

  // ---- torch's side -----------------------------------------------------------------------
  bool isCompleted() override;
  int sourceRank() const override { return sourceRank_; }
  std::vector<at::Tensor> result() override { return outputs_; }
  /// CUDA: the caller's current stream waits on the end event (no host block). CPU: nothing.
  void synchronize() override;
  /// Waits (host) until the operation completed or failed, raises its error, then
  /// synchronize(). A timeout other than kNoTimeout raises when it passes.
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // ---- the backend's side -----------------------------------------------------------------
  /// Done (CPU) or enqueued with `end` recorded (CUDA). Ignored after fail().
  void complete();
  /// Failed with `error`. Ignored after complete() or a first fail().
  void fail(std::exception_ptr error);
  bool settled() const { return settled_.load(std::memory_order_acquire); }

  const std::string& name() const { return name_; }
  uint64_t seq() const { return seq_; }
  bool onCuda() const { return device_.is_cuda(); }
  at::Device device() const { return device_; }

  /// Tensors the operation reads or writes besides outputs (inputs, staging buffers).
  std::vector<at::Tensor> keepAlive;
  int sourceRank_ = -1;  ///< recv: the rank the data came from
  /// When the call queued it (the log's "in the queue" time).
  std::chrono::steady_clock::time_point queuedAt = std::chrono::steady_clock::now();
#if TCCL_TORCH_CUDA
  std::unique_ptr<at::cuda::CUDAEvent> start;   ///< recorded on the caller's stream at the call
  std::unique_ptr<at::cuda::CUDAEvent> end;     ///< recorded on the backend stream after the op
  c10::optional<c10::cuda::CUDAStream> stream;  ///< the backend stream the op runs on
#endif

 private:
  const std::string name_;
  const uint64_t seq_;
  const at::Device device_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::atomic<bool> settled_{false};
};

}  // namespace tccl_torch

#endif  // TCCL_TORCH_WORK_TCCL_H_
