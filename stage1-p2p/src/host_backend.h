/*
 * host_backend.h: how the primitives wait, post and copy on a host thread.
 *
 * What it is: the CPU half of the executor contract (device/device_backend.cuh is the other).
 * One host worker thread runs one WorkItem, so the "block" is one thread: sync() is empty and
 * the thread is always the leader. Posting stores the counter and kicks the proxy thread,
 * which moves the step (proxy.h). Waiting spins briefly (a reply often comes within
 * microseconds), then sleeps on the communicator's ProgressSignal, which the proxy notifies
 * whenever it moves a counter.
 *
 * Invariants: waitAtLeast returns only when the counter has reached the value (acquire) or the
 * abort flag is raised; post makes the slot visible before the counter (release).
 *
 * NCCL counterpart: none (NCCL has no host executor); mirrors prims_simple.h's waitPeer/postPeer.
 * Added in: stage 1.
 */
#ifndef TCCL_HOST_BACKEND_H_
#define TCCL_HOST_BACKEND_H_

#include <cstddef>
#include <cstdint>

#include "device/fifo.h"
#include "device/reduce_copy.h"
#include "device/trace_record.h"
#include "progress_signal.h"
#include "tccl/common/trace.h"

namespace tccl {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();  // tells the core we spin: saves power, frees the sibling hyperthread
#endif
}

/// Whatever moves the other end of a connection (the proxy). Implemented by Proxy.
class Kickable {
 public:
  virtual ~Kickable() = default;
  /// Wakes the proxy thread if it sleeps.
  virtual void kick() = 0;
};

struct HostBackend {
  const volatile uint32_t* abortFlag;
  ProgressSignal* progress;  // notified by the proxy whenever it moves a counter
  Kickable* proxy;           // kicked after we move a counter
  // Step timeline (trace.h): where this item's records go (traceRecordEmit), and its lane;
  // no sink: tracing is off. (A pointer, so that this header needs nothing linked in.)
  void (*traceSink)(int pid, int tid, const TraceRecord& r, int64_t offsetNs) = nullptr;
  int tracePid = -1;
  int traceTid = 0;

  bool leader() const { return true; }
  void sync() const {}

  /// Waits until *counter >= value; false on abort or when the peer closed the connection
  /// before the value arrived.
  bool waitAtLeast(const uint64_t* counter, uint64_t value, const uint32_t* closed) const {
    for (int spin = 0;; spin++) {
      if (loadAcquire(counter) >= value) return true;
      // Atomic: the flag is raised by another thread (the proxy, tcclCommAbort).
      if (__atomic_load_n(abortFlag, __ATOMIC_ACQUIRE) != 0) return false;
      if (loadFlag(closed) != 0) {
        // The proxy sets closed after its last counter store: one more look, then give up.
        return loadAcquire(counter) >= value;
      }
      if (spin < 128) {
        cpuRelax();  // a short spin catches the common case of a quick reply
        continue;
      }
      // Sample, re-check, sleep: see ProgressSignal for why no wake-up is lost. The 1 ms cap
      // bounds the delay when the counter is moved by someone who does not notify (a GPU).
      uint32_t seen = progress->seq();
      if (loadAcquire(counter) >= value) return true;
      progress->wait(seen, 1000);
    }
  }

  bool tracing() const { return traceSink != nullptr; }
  uint64_t traceNow() const { return traceSink != nullptr ? traceNowNs() : 0; }
  void traceEmit(const TraceRecord& r) const { traceSink(tracePid, traceTid, r, 0); }

  void post(uint64_t* counter, uint64_t value) const {
    storeRelease(counter, value);  // release: the slot bytes and size are visible first
    proxy->kick();                 // the proxy thread moves the step (or frees the slot)
  }

  template <typename T>
  void copy(const T* src, T* d0, T* d1, size_t n) const {
    copyHost<T>(src, d0, d1, n);
  }
};

}  // namespace tccl

#endif  // TCCL_HOST_BACKEND_H_
