/*
 * host_backend.h: how the primitives wait, post and copy on a host thread.
 *
 * What it is: the CPU half of the executor contract (device/device_backend.cuh is the other).
 * One host worker thread runs one WorkItem, so the "block" is one thread: sync() is empty and
 * the thread is always the leader. Posting stores the counter, then runs the proxy's progress
 * right here (the bytes just posted usually leave without any thread hand-off) and kicks
 * whoever sleeps in the proxy's poll() for whatever is left. Waiting drives progress too, then
 * spins briefly, then yields the core a few times (stage 3), then sleeps: in the proxy's
 * poll() if no other thread is in it (the waiter becomes the progress engine), else on the
 * communicator's ProgressSignal.
 *
 * Invariants: waitAtLeast returns only when the counter has reached the value (acquire) or the
 * abort flag is raised; post makes the slot visible before the counter (release).
 *
 * NCCL counterpart: none (NCCL has no host executor); mirrors prims_simple.h's waitPeer/postPeer.
 * Added in: stage 1; the host fast path (progress passes, fibers, direct mode) in stage 3.
 */
#ifndef TCCL_HOST_BACKEND_H_
#define TCCL_HOST_BACKEND_H_

#include <sched.h>

#include <cstddef>
#include <cstdint>

#include "device/direct.h"
#include "device/fifo.h"
#include "device/reduce_copy.h"
#include "device/trace_record.h"
#include "device/work.h"
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
  /// Runs one pass of the proxy's progress on the calling thread, if nobody else is doing it
  /// right now. Returns true when anything moved. (An MPI-style progress engine: the thread
  /// that waits drives progress itself instead of waking another thread to do it.)
  virtual bool tryProgress() { return false; }
  /// The same for the send connectors only (stage 3): what a post needs, since only a send
  /// just published has somewhere to go. A receive pass here would mostly ask the kernel for
  /// a step that is a call away.
  virtual bool trySendProgress() { return tryProgress(); }
  /// Sleeps until progress may have happened (the signal moved past `seen`) or `timeoutUs`
  /// passes. The proxy overrides it so that one waiter sleeps where the bytes arrive.
  virtual void waitForProgress(ProgressSignal& signal, uint32_t seen, long timeoutUs) {
    signal.wait(seen, timeoutUs);
  }
};

/// Stage 3: after the spin, polls that give the core away (sched_yield) before a waiter
/// sleeps. A yield costs one system call when nobody else wants the core; a sleep in poll()
/// costs a wake-up (the scheduler's latency, a context switch) when the bytes come, which
/// with more ranks than cores costs a small all-reduce far more than yielding does (measured
/// in chapter 3, "Where a small call's time goes").
constexpr int kYieldPolls = 64;

/// Peer processes that move our counters directly (SHM, stage 5): nobody notifies us when
/// they do, and nobody tells us when they die. Implemented by PeerWatch
/// (transport/shm/peer_watch.h).
class PeerCheck {
 public:
  virtual ~PeerCheck() = default;
  /// Marks the connections of peers that have died closed. Never blocks.
  virtual void check() = 0;
};

/// With such peers, idle polls (sched_yield each) before a waiter sleeps: about 10 ms when the
/// core is free. Open MPI's shared-memory transport polls the same way; a sleep here would add
/// up to its length to every step that finds the peer a little late.
constexpr int kPeerPollRounds = 20000;
/// The sleep after that: short, since only a timeout wakes it.
constexpr long kPeerPollSleepUs = 100;

struct HostBackend {
  /// Host threads can hand the proxy pointers into user buffers (direct mode, device/direct.h).
  using Direct = HostDirect;
  /// Runs the reducing collectives of every element type (stage 5: each GPU kernel runs
  /// one type's, see device/kernel_entry.cuh), and the copying ones.
  static constexpr ReducingTypes kReducing = ReducingTypes::kEvery;  // device/work.h
  /// Stage 5: the LL protocol is the kernels' (device/prims_ll.h); host steps are Simple.
  static constexpr bool kHasLL = false;
  static constexpr bool kP2pLL = false;
  static constexpr bool runsCopies() { return true; }
  const volatile uint32_t* abortFlag;
  ProgressSignal* progress;  // notified by the proxy whenever it moves a counter
  Kickable* proxy;           // kicked after we move a counter
  PeerCheck* peers = nullptr;  // SHM peers (stage 5): poll longer, and check they live
  // Stage 3: polls with the pause instruction before the first sched_yield. 0 when this
  // host runs more ranks than it has cores: a peer that must run before our counter moves
  // may be waiting for this very core (Open MPI yields at once when oversubscribed too).
  int spinPolls = 128;
  // Set when the items run as fibers on one thread (executor_host.cc): a wait that cannot
  // pass calls yield (Fiber::yield: the next item runs) instead of spinning, and every wait
  // passed (or progress pass that moved something) bumps fiberTicks, which tells the
  // scheduler that the round was not idle.
  void (*yield)() = nullptr;
  uint64_t* fiberTicks = nullptr;
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
    if (loadAcquire(counter) >= value) return passed();
    // We may just have offered a buffer or allowed staging (fifo.h): an engine asleep in
    // poll() does not watch a socket whose step waits for that decision. Wake it.
    proxy->kick();
    if (yield != nullptr) {
      // A fiber: look, run a progress pass, and otherwise let the other items run.
      for (;;) {
        if (loadAcquire(counter) >= value) return passed();
        if (__atomic_load_n(abortFlag, __ATOMIC_ACQUIRE) != 0) return false;
        if (loadFlag(closed) != 0) return loadAcquire(counter) >= value;
        if (proxy->tryProgress()) {
          ++*fiberTicks;
          continue;
        }
        yield();
      }
    }
    for (int spin = 0;; spin++) {
      if (loadAcquire(counter) >= value) return true;
      // Atomic: the flag is raised by another thread (the proxy, tcclCommAbort).
      if (__atomic_load_n(abortFlag, __ATOMIC_ACQUIRE) != 0) return false;
      if (loadFlag(closed) != 0) {
        // The proxy sets closed after its last counter store: one more look, then give up.
        return loadAcquire(counter) >= value;
      }
      if (proxy->tryProgress()) {
        spin = 0;  // something moved: look again at once
        continue;
      }
      if (spin < spinPolls) {
        cpuRelax();  // a short spin catches the common case of a quick reply
        continue;
      }
      // (Stage 5: an SHM peer answers without notifying: with one, look much longer.)
      if (spin < spinPolls + (peers != nullptr ? kPeerPollRounds : kYieldPolls)) {
        sched_yield();  // look again soon, but let whoever else wants this core have it
        continue;
      }
      // Long idle: a dead SHM peer would never move the counter (it marks ours closed).
      if (peers != nullptr) peers->check();
      // Sample, re-check, sleep: see ProgressSignal for why no wake-up is lost. The 1 ms cap
      // bounds the delay when the counter is moved by someone who does not notify (a GPU).
      // One waiter sleeps in the proxy's poll() instead (Proxy::waitForProgress): it wakes
      // when the bytes arrive and moves them itself, with no thread hand-off.
      uint32_t seen = progress->seq();
      if (loadAcquire(counter) >= value) return true;
      proxy->waitForProgress(*progress, seen, peers != nullptr ? kPeerPollSleepUs : 1000);
    }
  }

  bool tracing() const { return traceSink != nullptr; }
  uint64_t traceNow() const { return traceSink != nullptr ? traceNowNs() : 0; }
  void traceEmit(const TraceRecord& r) const { traceSink(tracePid, traceTid, r, 0); }

  bool passed() const {
    if (fiberTicks != nullptr) ++*fiberTicks;
    return true;
  }

  void post(uint64_t* counter, uint64_t value, bool /*gpuScope: kernels only*/ = false) const {
    storeRelease(counter, value);  // release: the slot bytes and size are visible first
    proxy->trySendProgress();      // send what we just published, on this thread
    proxy->kick();                 // the proxy thread finishes whatever did not fit
  }
  /// The consumer's head (stage 5 tells the two apart for the GPU): the same on the host.
  void postConsumed(uint64_t* head, uint64_t value) const { post(head, value); }

  template <typename T, typename Fn>
  void reduceCopy(const T* recvIn, const T* userIn, T* d0, T* d1, size_t n, Fn fn,
                  bool postOp) const {
    reduceCopyHost<T>(recvIn, userIn, d0, d1, n, fn, postOp);
  }
};

}  // namespace tccl

#endif  // TCCL_HOST_BACKEND_H_
