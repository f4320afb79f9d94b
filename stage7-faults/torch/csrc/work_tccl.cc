/**
 * work_tccl.cc: completion, failure and waiting for one operation (see work_tccl.h).
 * Added in: stage 4.
 */
#include "work_tccl.h"

#include <c10/util/Exception.h>

namespace tccl_torch {

WorkTccl::WorkTccl(int rank, c10d::OpType type, std::string name, uint64_t seq,
                   std::vector<at::Tensor> outputs, at::Device device)
    : c10d::Work(rank, type),
      name_(std::move(name)),
      seq_(seq),
      device_(device),
      outputs_(std::move(outputs)) {
  // A Future that knows its device records CUDA events when it is completed and makes its
  // consumers' streams wait on them: that is how DDP's bucket callbacks stay stream-ordered.
  std::vector<c10::Device> devices;
  if (device_.is_cuda()) devices.push_back(device_);
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                     devices);
}

WorkTccl::~WorkTccl() = default;

bool WorkTccl::isCompleted() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!completed_) return false;
    if (exception_) return true;
  }
#if TCCL_TORCH_CUDA
  // Enqueued is not done: ask the event whether the GPU has passed the end of the op.
  if (end) return end->query();
#endif
  return true;
}

void WorkTccl::synchronize() {
#if TCCL_TORCH_CUDA
  if (end) {
    // The caller's stream, not the host, waits: work queued after wait() on that stream runs
    // after the collective, and the Python thread goes on at once (ProcessGroupNCCL's
    // synchronizeStream).
    c10::cuda::CUDAGuard guard(device_);
    end->block(c10::cuda::getCurrentCUDAStream(device_.index()));
  }
#endif
}

bool WorkTccl::wait(std::chrono::milliseconds timeout) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (timeout == kWaitForever) {
      cv_.wait(lock, [&] { return completed_; });
    } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
      TCCL_TORCH_CHECK(false, "tccl: ", name_, " (operation ", seq_,
                       " of this process group) did "
                       "not complete within the ",
                       timeout.count(), " ms given to wait()");
    }
    if (exception_) std::rethrow_exception(exception_);
  }
  synchronize();
  return true;
}

void WorkTccl::complete() {
  if (settled_.exchange(true, std::memory_order_acq_rel)) return;  // the watchdog failed it
#if TCCL_TORCH_CUDA
  if (stream) {
    // Marking the Future while the backend stream is current makes the Future's own event
    // land on that stream, after the collective.
    c10::cuda::CUDAMultiStreamGuard guard(*stream);
    future_->markCompleted(c10::IValue(outputs_));
    finish();
    return;
  }
#endif
  future_->markCompleted(c10::IValue(outputs_));
  finish();
}

void WorkTccl::fail(std::exception_ptr error) {
  if (settled_.exchange(true, std::memory_order_acq_rel)) return;
  future_->setError(error);
  finish(error);
}

}  // namespace tccl_torch
