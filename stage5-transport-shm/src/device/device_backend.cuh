/*
 * device/device_backend.cuh: how the primitives wait, post and copy inside a CUDA thread block.
 *
 * What it is: the GPU half of the executor contract (host_backend.h is the other half). All
 * threads of a block call every primitive together; thread 0 (the leader) polls and publishes
 * the FIFO counters, and __syncthreads() hands the result to the other threads.
 *
 * Invariants: every method is called by all threads of the block (it contains barriers); the
 * leader alone touches the counters; an abort seen by the leader is seen by every thread after
 * the barrier, so all threads leave together and no barrier is left waiting.
 *
 * NCCL counterpart: src/device/prims_simple.h (waitPeer, postPeer; the "wait" and "post"
 * thread roles), src/device/common.h (barriers).
 * Added in: stage 1; one kernel per element type, the rarer flag checks and the LL protocol's
 * per-thread polling in stage 5.
 */
#ifndef TCCL_DEVICE_DEVICE_BACKEND_CUH_
#define TCCL_DEVICE_DEVICE_BACKEND_CUH_

#include "device/direct.h"
#include "device/fifo.h"
#include "device/reduce_copy.h"
#include "device/trace_record.h"
#include "device/work.h"

namespace tccl {

struct DeviceBackend {
  /// Device buffers cannot be handed to a host proxy: every step is staged in the FIFO.
  using Direct = NoDirect;
  /// Stage 5: which element type's reducing collectives this kernel runs. Each type has a
  /// kernel of its own, compiled in a translation unit of its own (device/kernel_entry.cuh
  /// says why); this one, the base kernel's, runs none: only copies and send/recv.
  static constexpr ReducingTypes kReducing = ReducingTypes::kNone;  // device/work.h
  /// Stage 5: kernels run the LL protocol too (device/prims_ll.h); the host executor does not.
  static constexpr bool kHasLL = true;
  /// Stage 5: send/recv on LL too (not in the base kernel for batches without LL, below).
  static constexpr bool kP2pLL = true;
  /// Whether this launch runs the batch's copying collectives (broadcast, all-gather): a batch
  /// that needs several kernels runs them in the first one only.
  bool copies = true;
  __device__ bool runsCopies() const { return copies; }
  const volatile uint32_t* abortFlag;
  // Step timeline (device/trace_record.h): this block's record buffer, null when tracing is off; the
  // leader counts its records here and the kernel stores the count once at the end (one
  // write to mapped host memory instead of one read-modify-write per record).
  TraceBuffer* trace = nullptr;
  uint32_t traceCount = 0;

  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ int tid() const { return int(threadIdx.x); }
  __device__ int nthreads() const { return int(blockDim.x); }

  /// Polls of a counter between two looks at the abort and closed flags (waitAtLeast).
  static constexpr int kSpinsPerCheck = 1000;

  __device__ bool tracing() const { return trace != nullptr; }
  /// The GPU's global nanosecond timer (the host converts it after the kernel).
  __device__ uint64_t traceNow() const {
    if (trace == nullptr) return 0;
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  /// The leader appends the record (the oldest is overwritten when the buffer is full).
  __device__ void traceEmit(const TraceRecord& r) {
    if (!leader()) return;
    trace->recs[traceCount % kTraceRecsPerBlock] = r;
    traceCount++;
  }
  __device__ void sync() const { __syncthreads(); }

  /// Waits until *counter >= value. Only the leader polls (one PCIe/NVLink read per poll, not
  /// one per thread); the barrier then releases the block. Returns false on abort, or when the
  /// connection was closed by the peer before the value arrived.
  /// `seen` (stage 5, may be null): receives, in every thread, the value the leader saw.
  __device__ bool waitAtLeast(const uint64_t* counter, uint64_t value, const uint32_t* closed,
                              uint64_t* seen = nullptr) const {
    __shared__ int aborted;
    __shared__ uint64_t seenShared;
    if (leader()) {
      aborted = 0;
      // Stage 5: the abort flag lives in mapped host memory, and `closed` does over SHM: each
      // read is a PCIe round trip, which at every poll would stretch the loop (and the time
      // to see the counter move) to a microsecond. They are read once every kSpinsPerCheck
      // polls instead, as NCCL's NCCL_SPINS_BEFORE_CHECK_ABORT; an abort is seen within a
      // millisecond or so.
      int spins = 0;
      uint64_t v;
      // Acquire: slot data read after this loop is at least as new as the counter we saw.
      while ((v = loadAcquire(counter)) < value) {
        if (++spins < kSpinsPerCheck) continue;
        spins = 0;
        if (*abortFlag != 0) {
          aborted = 1;
          break;
        }
        if (*reinterpret_cast<const volatile uint32_t*>(closed) != 0) {
          // closed is set after the last counter update: re-read once before giving up.
          __threadfence_system();
          if ((v = loadAcquire(counter)) < value) aborted = 1;
          break;
        }
      }
      seenShared = v;
    }
    // Barrier: the leader's acquire plus the barrier order every thread's later slot reads
    // after the producer's writes (causality through bar.sync).
    __syncthreads();
    if (seen != nullptr) *seen = seenShared;
    return aborted == 0;
  }

  // ---- LL (stage 5, device/prims_ll.h): every thread polls its own lines -------------------
  /// Why a thread stopped polling: the block's shared word (0: nobody did). Raised by any
  /// thread, read by the others between polls, so that threads waiting for lines that will
  /// never come (an abort, a size mismatch) stop too. Zeroed at kernel start (runKernel); an
  /// item whose word was raised fails, so nobody needs to lower it again. A WorkStatus kept as
  /// a uint32_t: it is a volatile shared word that __syncthreads_or tests (llStop and
  /// llSyncStatus convert).
  __device__ static volatile uint32_t& stopWord() {
    __shared__ uint32_t word;
    return word;
  }
  /// Polls one line of step `step` of `fifo` until its flags equal `flag`, looking at the
  /// abort flag, at `closed` and at `tail` every kSpinsPerCheck polls, and at the stop word at
  /// every poll (a shared-memory read). Returns false, with the stop word raised, when it gave
  /// up. A `tail` past `step` with the line still missing means the producer sent this step
  /// on Simple: the two ends chose different protocols, which only a send and a receive of
  /// different sizes can cause (WorkStatus::kSizeMismatch, as Simple's size check reports).
  __device__ bool llWaitLine(const LLLine* line, uint32_t flag, const ConnFifo* fifo,
                             uint64_t step, uint64_t* data) const {
    int spins = 0;
    while (!llLoadLine(line, flag, data)) {
      if (stopWord() != 0) return false;
      if (++spins < kSpinsPerCheck) continue;
      spins = 0;
      if (*abortFlag != 0) {
        llStop(WorkStatus::kAborted);
        return false;
      }
      // Acquire: a later Simple step of the producer (a legitimate mix of protocols) moves
      // tail past `step` too, and orders this step's lines before it; so the line, read again
      // after the acquire, is there unless the producer sent this step on Simple.
      if (loadAcquire(&fifo->tail) > step) {
        if (llLoadLine(line, flag, data)) return true;
        llStop(WorkStatus::kSizeMismatch);
        return false;
      }
      if (*reinterpret_cast<const volatile uint32_t*>(&fifo->closed) != 0) {
        // closed is set after the peer's last write: look at the line once more.
        __threadfence_system();
        if (llLoadLine(line, flag, data)) return true;
        llStop(WorkStatus::kPeerClosed);
        return false;
      }
    }
    return true;
  }
  /// Raises the stop word (a thread found a failure every thread must act on).
  __device__ void llStop(WorkStatus why) const { stopWord() = static_cast<uint32_t>(why); }
  /// The end of an LL step: a barrier that also tells every thread whether the stop word was
  /// raised before it (__syncthreads_or: the same answer in every thread, even if a thread
  /// that runs ahead into the next step raises the word before a slow one has looked), then
  /// the reason (WorkStatus::kOk: none).
  __device__ WorkStatus llSyncStatus() const {
    if (__syncthreads_or(stopWord() != 0) == 0) return WorkStatus::kOk;
    const uint32_t why = stopWord();
    return why != 0 ? static_cast<WorkStatus>(why) : WorkStatus::kAborted;
  }

  /// LL128's poll (device/prims_ll128.h): whether a thread polling lines of `fifo` goes on.
  /// The stop word at every poll; the abort flag and `closed` every kSpinsPerCheck polls (a
  /// read across the bus each), raising the stop word when either is set. `closed` is set
  /// after the peer's last write, so the caller's next poll is its last look at the lines:
  /// *lastLook turns true, and the call after it gives up with WorkStatus::kPeerClosed.
  __device__ bool llKeepPolling(const ConnFifo* fifo, int* spins, bool* lastLook) const {
    if (stopWord() != 0) return false;
    if (*lastLook) {
      llStop(WorkStatus::kPeerClosed);
      return false;
    }
    if (++*spins < kSpinsPerCheck) return true;
    *spins = 0;
    if (*abortFlag != 0) {
      llStop(WorkStatus::kAborted);
      return false;
    }
    if (*reinterpret_cast<const volatile uint32_t*>(&fifo->closed) != 0) {
      __threadfence_system();  // the lines the peer wrote before closing are visible after it
      *lastLook = true;
    }
    return true;
  }

  /// Publishes *counter = value once every thread's writes to the slot are done. gpuScope:
  /// the reader runs on this GPU (ConnInfo::gpuScope).
  __device__ void post(uint64_t* counter, uint64_t value, bool gpuScope = false) const {
    // Barrier: all threads have finished writing (or reading) the slot.
    __syncthreads();
    if (!leader()) return;
    // One release store. Release is cumulative in PTX: it orders before the counter every
    // write ordered before it, the other threads' slot writes included (the barrier ordered
    // those). At system scope for the CPU proxy or a peer on another GPU; NCCL's postPeer
    // does the same as fence.acq_rel.sys + a relaxed store. (Stage 5: no __threadfence_system
    // -- a sequentially consistent fence -- precedes it: the release already orders what the
    // reader needs, and the fence would cost microseconds a step.)
    // When the reader is a kernel on this GPU (two ranks sharing it), GPU scope is enough:
    // both sides then meet in this GPU's L2, and the store need not wait until the writes are
    // visible to the whole system, which is most of a system-scope release's cost. The
    // reader's acquire is at system scope, which includes this GPU.
    if (gpuScope) {
      asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(counter), "l"(value) : "memory");
    } else {
      storeRelease(counter, value);
    }
  }

  /// Publishes the consumer's *head = value once every thread is done reading the slot. No
  /// release: what must not overtake this store are the slot's loads, and they have returned
  /// (their values were used, and the barrier waited for every thread) before it issues, so a
  /// producer that sees the new head cannot overwrite bytes we still read. A relaxed store
  /// skips the system-wide fence a release costs at every received step. NCCL's postPeer
  /// fences only on the send side, for the same reason. (Stage 5.) The argument is the
  /// hardware's, not PTX's: the memory model would need a release to order the other
  /// threads' loads before the store; GPUs neither speculate loads nor let a returned load be
  /// satisfied by a later write, which is what NCCL relies on too.
  /// synced: the caller has just passed a barrier after its last slot read (the LL step).
  __device__ void postConsumed(uint64_t* head, uint64_t value, bool synced = false) const {
    if (!synced) __syncthreads();
    if (leader()) asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(head), "l"(value) : "memory");
  }

  template <typename T, typename Fn>
  __device__ void reduceCopy(const T* recvIn, const T* userIn, T* d0, T* d1, size_t n, Fn fn,
                             bool postOp) const {
    reduceCopyBlock<T>(recvIn, userIn, d0, d1, n, fn, postOp);
  }
};

/// The base kernel's backend for a batch without LL steps (stage 5): the same, with send/recv
/// on Simple only. LL send/recv compiled into the base kernel slows a large send/recv on
/// Simple even though it never runs (the compiler's choices for the Simple loop change with
/// it), so the launcher picks this kernel whenever the batch has no LL step (chapter 5, "The
/// LL protocol", has the figures).
struct SimpleP2pDeviceBackend : DeviceBackend {
  static constexpr bool kP2pLL = false;
};

/// The backend of element type `DType`'s kernel (stage 5): the same, but its reducing
/// collectives are that type's.
template <int DType>
struct TypedDeviceBackend : DeviceBackend {
  static constexpr ReducingTypes kReducing = ReducingTypes::kOne;
  static constexpr int kReducingDType = DType;
};

}  // namespace tccl

#endif  // TCCL_DEVICE_DEVICE_BACKEND_CUH_
