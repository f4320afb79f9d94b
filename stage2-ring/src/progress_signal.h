/*
 * progress_signal.h: a futex that host threads sleep on while waiting for a FIFO counter.
 *
 * What it is: waiting host threads (executor workers, the proxy) must not burn a core each:
 * with more ranks than cores they would starve each other. A ProgressSignal is a 32-bit
 * sequence number: whoever moves a counter that someone may be waiting for calls notify()
 * (bump + FUTEX_WAKE); a waiter samples seq(), re-checks its condition, then wait()s for the
 * sequence to change. Waits are bounded (a timeout) so a counter moved by an agent that cannot
 * notify (a GPU kernel, a peer process) is still seen promptly.
 *
 * Invariants: notify() is called after the counter store, and the waiter re-checks its
 * condition after sampling seq(), so a wake-up can be late but never lost.
 *
 * NCCL counterpart: none exactly; NCCL's proxy and kernels spin. (NCCL's proxy sleeps on a
 * condition variable when it has no ops: proxy.cc ncclProxyGetPostedOps.)
 * Added in: stage 1.
 */
#ifndef TCCL_PROGRESS_SIGNAL_H_
#define TCCL_PROGRESS_SIGNAL_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace tccl {

class ProgressSignal {
 public:
  uint32_t seq() const { return seq_.load(std::memory_order_acquire); }

  /// Wakes every waiter. Cheap when nobody sleeps (one atomic, no syscall).
  void notify() {
    seq_.fetch_add(1, std::memory_order_acq_rel);
    if (sleepers_.load(std::memory_order_acquire) > 0) {
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq_), FUTEX_WAKE_PRIVATE, INT32_MAX,
              nullptr, nullptr, 0);
    }
  }

  /// Sleeps until seq() != seen or `timeoutUs` passes.
  void wait(uint32_t seen, long timeoutUs) {
    timespec ts{timeoutUs / 1000000, (timeoutUs % 1000000) * 1000};
    // sleepers_ is raised before the futex re-checks seq_: a notify() between our last check
    // and the syscall either changes seq_ (the kernel sees it and returns at once) or sees
    // sleepers_ > 0 and wakes us.
    sleepers_.fetch_add(1, std::memory_order_acq_rel);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq_), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr,
            0);
    sleepers_.fetch_sub(1, std::memory_order_acq_rel);
  }

 private:
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word must be 32 bits");
  std::atomic<uint32_t> seq_{0};
  std::atomic<int> sleepers_{0};
};

}  // namespace tccl

#endif  // TCCL_PROGRESS_SIGNAL_H_
