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
 * Added in: stage 1.
 */
#ifndef TCCL_DEVICE_DEVICE_BACKEND_CUH_
#define TCCL_DEVICE_DEVICE_BACKEND_CUH_

#include "device/fifo.h"
#include "device/reduce_copy.h"
#include "device/trace_record.h"

namespace tccl {

struct DeviceBackend {
  const volatile uint32_t* abortFlag;
  // Step timeline (device/trace_record.h): this block's record buffer, null when tracing is off; the
  // leader counts its records here and the kernel stores the count once at the end (one
  // write to mapped host memory instead of one read-modify-write per record).
  TraceBuffer* trace = nullptr;
  uint32_t traceCount = 0;

  __device__ bool leader() const { return threadIdx.x == 0; }

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
  __device__ bool waitAtLeast(const uint64_t* counter, uint64_t value,
                              const uint32_t* closed) const {
    __shared__ int aborted;
    if (leader()) {
      aborted = 0;
      // Acquire: slot data read after this loop is at least as new as the counter we saw.
      while (loadAcquire(counter) < value) {
        if (*abortFlag != 0) {
          aborted = 1;
          break;
        }
        if (*reinterpret_cast<const volatile uint32_t*>(closed) != 0) {
          // closed is set after the last counter update: re-read once before giving up.
          __threadfence_system();
          if (loadAcquire(counter) < value) aborted = 1;
          break;
        }
      }
    }
    // Barrier: the leader's acquire plus the barrier order every thread's later slot reads
    // after the producer's writes (causality through bar.sync).
    __syncthreads();
    return aborted == 0;
  }

  /// Publishes *counter = value once every thread's writes to the slot are done.
  __device__ void post(uint64_t* counter, uint64_t value) const {
    // Barrier: all threads have finished writing (or reading) the slot.
    __syncthreads();
    if (leader()) {
      // System-scope fence: the slot writes of the whole block (ordered before us by the
      // barrier) become visible to the CPU proxy or the peer before the counter does.
      __threadfence_system();
      storeRelease(counter, value);
    }
  }

  template <typename T>
  __device__ void copy(const T* src, T* d0, T* d1, size_t n) const {
    copyBlock<T>(src, d0, d1, n);
  }
};

}  // namespace tccl

#endif  // TCCL_DEVICE_DEVICE_BACKEND_CUH_
