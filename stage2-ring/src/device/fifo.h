/*
 * device/fifo.h: a connection's FIFO and the executor's view of it.
 *
 * What it is: the heart of the data path. A connection (one direction between two ranks on one
 * channel) is a ring of kNSteps slots of stepBytes each plus two counters:
 *
 *     producer                                consumer
 *     waits head + kNSteps > step             waits tail > step
 *     writes slot step % kNSteps              reads slot step % kNSteps
 *     sizes[slot] = bytes; fence; tail=step+1 (done reading) head = step+1
 *
 * `tail` counts steps written, `head` counts steps consumed; both only grow. The producer may
 * run kNSteps ahead of the consumer, which is what lets a pipeline overlap copy and transfer.
 *
 * Invariants:
 *  - head <= tail <= head + kNSteps, always.
 *  - sizes[slot] is written before tail is published (release) and read after tail is seen
 *    (acquire), so the consumer never reads a size or a byte from before the producer's write.
 *  - ConnInfo::step is the next step this side will use; it persists across operations so the
 *    two sides stay in lockstep over the life of the connection.
 *  - The FIFO lives in host memory; when the communicator has a GPU it is pinned and mapped so
 *    that a kernel reads and writes it through the same (UVA) pointers.
 *
 * NCCL counterpart: src/include/device.h (ncclConnInfo, NCCL_STEPS, connFifo sizes) and the
 * waitPeer/postPeer logic of src/device/prims_simple.h.
 * Added in: stage 1.
 */
#ifndef TCCL_DEVICE_FIFO_H_
#define TCCL_DEVICE_FIFO_H_

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TCCL_HOST_DEVICE __host__ __device__
#define TCCL_DEVICE __device__
// Keeps a device function out of line: one copy per template instance instead of one per call
// site, which keeps the kernel's code (and ptxas's time) proportional to what it does.
#define TCCL_NOINLINE __noinline__
#else
#define TCCL_HOST_DEVICE
#define TCCL_DEVICE
#define TCCL_NOINLINE
#endif

namespace tccl {

/// Slots per FIFO, as NCCL_STEPS.
constexpr int kNSteps = 8;

/// The counters of one FIFO. Each counter has its own 64-byte line so that the producer's and
/// the consumer's writes never share a cache line (no false sharing while both spin).
struct ConnFifo {
  alignas(64) uint64_t tail;  // written by the producer: steps published
  alignas(64) uint64_t head;  // written by the consumer: steps consumed
  alignas(64) int64_t sizes[kNSteps];  // bytes in each slot, set by the producer
  // Set (after the last tail) by a proxy whose peer closed the connection cleanly between
  // steps: a consumer still waiting for data then fails instead of waiting forever.
  alignas(64) uint32_t closed;
};

/// One side's view of a connection, as NCCL's ncclConnInfo. Shared by the host executor, the
/// GPU kernel and the proxy; lives in the same (mapped) host allocation as the FIFO.
struct ConnInfo {
  char* buff;          // kNSteps slots of stepBytes each
  ConnFifo* fifo;      // counters for this side's FIFO
  uint64_t stepBytes;  // bytes per slot; the same on every rank (TCCL_BUFFSIZE / kNSteps)
  uint64_t step;       // next step this side will produce or consume
  int32_t peer;        // the rank at the other end, and the channel: names the connection in
  int32_t channel;     // step traces (trace.h)
};

// ---- Memory ordering helpers ---------------------------------------------------------------
// The counters are read by another agent (the proxy thread, a GPU, a peer): a producer must
// make its slot writes visible before the counter moves (release), and a consumer must not read
// the slot before it has seen the counter (acquire). On the GPU the other agent may be the CPU,
// so the scope is the whole system (.sys).

TCCL_HOST_DEVICE inline uint64_t loadAcquire(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

TCCL_HOST_DEVICE inline void storeRelease(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/// A flag another agent raises (closed, abort): acquire on the host, a volatile read on the GPU.
TCCL_HOST_DEVICE inline uint32_t loadFlag(const uint32_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const volatile uint32_t*>(p);
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

}  // namespace tccl

#endif  // TCCL_DEVICE_FIFO_H_
