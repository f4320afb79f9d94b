/*
 * fiber.h: cooperative threads for the host executor.
 *
 * What it is: a Fiber runs a function on its own stack, on the thread that resumes it, until
 * the function yields or returns. The host executor runs every work item of a batch as a fiber
 * on the calling thread (executor_host.cc): an item that must wait for a counter yields, and
 * the next item runs -- the way a GPU's SM switches to another resident warp when one stalls.
 * The items still all progress together (a group's sends and receives must, see executor.h),
 * but one thread does it, as MPI's single-threaded progress engine does: no thread hand-offs,
 * and on a machine with as many ranks as cores, no thread competes with another rank's.
 *
 * Invariants: resume() and yield() alternate strictly (a fiber is resumed only by the thread
 * that started it, and yields only to it); a fiber's function runs to its end before start()
 * may be called again; stacks are fixed-size mappings with a guard page below, so an overflow
 * faults instead of corrupting memory. The sanitizers are told about every switch (ASan's and
 * TSan's fiber annotations), so they follow the stacks instead of reporting false errors.
 *
 * NCCL counterpart: none (a host executor is tccl's); the idea is the GPU's warp scheduling.
 * Added in: stage 3 (the host fast path).
 */
#ifndef TCCL_FIBER_H_
#define TCCL_FIBER_H_

#include <ucontext.h>

#include <cstddef>
#include <functional>

#include "tccl/result.h"

namespace tccl {

class Fiber {
 public:
  Fiber() = default;
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  /// Prepares the fiber to run fn (allocating its stack on first use). Does not run it.
  tcclResult_t start(std::function<void()> fn);
  /// Runs the fiber until it yields or fn returns. Returns true once fn has returned.
  bool resume();
  /// From inside a fiber: back to the thread that resumed it.
  static void yield();
  /// The fiber running on this thread, or null outside any fiber.
  static Fiber* current();

 private:
  static void entry(unsigned hi, unsigned lo);
  void switchIn();   // on the resumer's stack: into the fiber
  void switchOut();  // on the fiber's stack: back to the resumer

  static constexpr size_t kStackBytes = 1 << 20;  // mapped lazily: only touched pages cost
  static constexpr size_t kGuardBytes = 1 << 12;
  void* mapping_ = nullptr;  // guard page + stack
  ucontext_t context_{};
  ucontext_t caller_{};
  std::function<void()> fn_;
  bool finished_ = true;
  // Sanitizer bookkeeping (unused in plain builds).
  void* tsanFiber_ = nullptr;
  void* tsanCaller_ = nullptr;
  void* asanFakeStack_ = nullptr;
  const void* callerStackBottom_ = nullptr;
  size_t callerStackSize_ = 0;
};

}  // namespace tccl

#endif  // TCCL_FIBER_H_
