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
 *  - head <= tail <= head + kNSteps, always (on a connection that also carries LL steps,
 *    stage 5: step - kNSteps <= head <= step, since LL steps move head but not tail).
 *  - sizes[slot] is written before tail is published (release) and read after tail is seen
 *    (acquire), so the consumer never reads a size or a byte from before the producer's write.
 *  - ConnInfo::step is the next step this side will use; it persists across operations so the
 *    two sides stay in lockstep over the life of the connection.
 *  - The FIFO lives in host memory; when the communicator has a GPU it is pinned and mapped so
 *    that a kernel reads and writes it through the same (UVA) pointers.
 *
 * Direct mode (host buffers on a proxy transport): instead of staging a step's bytes in the
 * slot, the producer may publish a pointer to its user buffer (ptrs[slot]) for the proxy to
 * send from, and the consumer may offer a user buffer (ptrs[slot], ptrSizes[slot]) for the
 * proxy to receive into. Which of the two -- the consumer offering or the proxy staging --
 * decides a receive step is settled by one compare-and-swap on claims[slot], whose value is
 * (step << 2) | who, so the two can never both think they own it. The consumer offers every
 * step of a receive that fits in the FIFO up front (a pre-posted receive, in MPI's words), so
 * the proxy finds the offer even when the consumer's thread is slow to come back. That saves
 * the two memcpys a staged step costs, which is what lets host-memory sends match MPI over TCP.
 * A host consumer that wants a step in the slot says so too (`staged`), so that a step nobody
 * has decided on yet -- one that arrived before the receive that will take it was posted --
 * can wait in the socket, as MPI's rendezvous keeps large messages on the sender until they
 * are matched, instead of being staged and copied. (A GPU consumer never decides: on a
 * communicator with a GPU the proxy stages every undecided step.)
 *
 * The LL and LL128 protocols (stage 5) share the step counter and head, not the slots: their
 * own kNSteps slots of flagged lines (below) follow the Simple slots in a device connector's
 * block, LL128's only over P2P.
 *
 * NCCL counterpart: src/include/device.h (ncclConnInfo, NCCL_STEPS, connFifo sizes,
 * ncclLLFifoLine, NCCL_LL128_LINEELEMS) and the waitPeer/postPeer logic of
 * src/device/prims_simple.h.
 * Added in: stage 1; the host fast path (direct mode: pointers, claims, staged) in stage 3;
 * the LL and LL128 slots in stage 5.
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
  // Direct mode (see above): per slot, the user buffer standing in for the slot's staging
  // space, the bytes it can take (receive side), and who decided (receive side).
  alignas(64) char* ptrs[kNSteps];
  int64_t ptrSizes[kNSteps];
  uint64_t claims[kNSteps];
  // Receive side, host consumer: steps below `staged` may go to the staging slots (the
  // consumer reads them from there). Steps nobody has decided on yet wait in the socket.
  uint64_t staged;
};

/// claims[slot] values: (step << 2) | kClaimBy...
constexpr uint64_t kClaimByConsumer = 1;  // the consumer offered ptrs[slot]: receive there
constexpr uint64_t kClaimByProxy = 2;     // the proxy got there first: staged in the slot
TCCL_HOST_DEVICE inline uint64_t claimValue(uint64_t step, uint64_t who) {
  return (step << 2) | who;
}

/// One side's view of a connection, as NCCL's ncclConnInfo. A host connector's is shared by
/// the host executor and the proxy and lives in the same host allocation as the FIFO. A device
/// connector's kernels read a copy in GPU memory (Connector::devConn, stage 5), whose step
/// only they advance; the host keeps the pointers and sizes, which never change.
struct ConnInfo {
  char* buff;          // kNSteps slots of stepBytes each
  ConnFifo* fifo;      // counters for this side's FIFO
  uint64_t stepBytes;  // bytes per slot; the same on every rank (TCCL_BUFFSIZE / kNSteps)
  uint64_t step;       // next step this side will produce or consume
  uint32_t direct;     // the transport accepts direct (user-buffer) steps from a host executor
  int32_t peer;        // the rank at the other end, and the channel: names the connection in
  int32_t channel;     // step traces (trace.h)
  // Stage 5, send side: the consumer's kernels run on this same GPU (two ranks sharing one,
  // over P2P), so publishing a step needs a release at GPU scope only, not at system scope
  // (device_backend.cuh's post says what that saves).
  uint32_t gpuScope;
  // Stage 5, LL protocol (device/prims_ll.h): this connection's kNSteps LL slots, after the
  // Simple slots in the same block; null where the transport has none (host connectors, the
  // network), and then the planner never sends an LL step here.
  char* llBuff;
  // Send side, LL: the consumer's head as this side last read it. A step whose slot is known
  // free from it needs no poll of head (a read across the bus) and no barrier.
  uint64_t headSeen;
  // Stage 5, LL128 protocol (device/prims_ll128.h): this connection's kNSteps LL128 slots,
  // after the LL slots; null unless the transport writes them over NVLink (P2P), and then the
  // planner never sends an LL128 step here.
  char* ll128Buff;
};

// ---- The LL protocol's slots (stage 5; device/prims_ll.h runs them) --------------------------
// A slot is kLLDataLines lines of 16 bytes, each carrying 8 bytes of data and two copies of a
// 32-bit flag, plus one header line that carries the step's byte count. A line is valid when
// both its flags equal the step's flag, so the data needs no fence and no tail: the reader
// polls the data itself. Every step's flag differs from the ones the slot held before.

/// One LL line, as NCCL's ncclLLFifoLine: four 32-bit words {data lo, flag, data hi, flag}
/// (each 8-byte half is one word of data and the flag).
struct alignas(16) LLLine {
  uint64_t v[2];
};

/// Data lines per slot: 8 per thread of a 512-thread block (NCCL's NCCL_LL_LINES_PER_THREAD),
/// 32 KiB of data per step.
constexpr int kLLDataLines = 4096;
constexpr int kLLSlotLines = kLLDataLines + 1;  // + the header line, last
constexpr size_t kLLStepBytes = size_t(kLLDataLines) * 8;  // data bytes per step
constexpr size_t kLLBuffBytes = size_t(kNSteps) * kLLSlotLines * sizeof(LLLine);

// The flag of step s is s + 1 (lines start zeroed, so no line is valid before its step is
// written). The flag wraps after 2^32 steps: a line left unwritten that long would look
// valid again, so once every 2^31 steps the producer writes the current flag into every line
// of the slot it uses (the eight steps whose number matches kLLCleanMask: one per slot), as
// NCCL does. TCCL_LL_TEST_CLEANUP (a test build) wraps the flag at 256 steps instead.
#if defined(TCCL_LL_TEST_CLEANUP)
constexpr uint64_t kLLFlagWrap = 0x100;
constexpr uint64_t kLLCleanMask = 0x78;
#else
constexpr uint64_t kLLFlagWrap = uint64_t(1) << 32;
constexpr uint64_t kLLCleanMask = 0x7ffffff8;
#endif
TCCL_HOST_DEVICE inline uint32_t llFlag(uint64_t step) { return uint32_t((step + 1) % kLLFlagWrap); }
TCCL_HOST_DEVICE inline bool llCleanStep(uint64_t step) { return (step & kLLCleanMask) == kLLCleanMask; }
TCCL_HOST_DEVICE inline LLLine* llSlot(const ConnInfo* c, uint64_t step) {
  return reinterpret_cast<LLLine*>(c->llBuff) + (step % kNSteps) * kLLSlotLines;
}

/// Writes one line: data and flags in one 16-byte store. No fence, before or after: a reader
/// that sees the flag in an 8-byte half sees that half's data, because an aligned 8-byte half
/// of a vector store is never torn (the hardware's guarantee NCCL's LL relies on, over
/// NVLink, PCIe and in local memory alike). Volatile (relaxed, system scope): it must reach
/// the peer's memory, not stay in this SM's view. (The host versions of these helpers exist
/// so that the headers compile everywhere; host executors never run LL.)
TCCL_HOST_DEVICE inline void llStoreLine(LLLine* p, uint64_t data, uint32_t flag) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p),
               "r"(uint32_t(data)), "r"(flag), "r"(uint32_t(data >> 32)), "r"(flag)
               : "memory");
#else
  __atomic_store_n(&p->v[0], (uint64_t(flag) << 32) | uint32_t(data), __ATOMIC_RELAXED);
  __atomic_store_n(&p->v[1], (uint64_t(flag) << 32) | uint32_t(data >> 32), __ATOMIC_RELAXED);
#endif
}
/// Reads one line once (volatile: every poll goes to memory). True when both flags match.
TCCL_HOST_DEVICE inline bool llLoadLine(const LLLine* p, uint32_t flag, uint64_t* data) {
  uint32_t d1, f1, d2, f2;
#if defined(__CUDA_ARCH__)
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(d1), "=r"(f1), "=r"(d2), "=r"(f2)
               : "l"(p)
               : "memory");
#else
  const uint64_t lo = __atomic_load_n(&p->v[0], __ATOMIC_RELAXED);
  const uint64_t hi = __atomic_load_n(&p->v[1], __ATOMIC_RELAXED);
  d1 = uint32_t(lo), f1 = uint32_t(lo >> 32), d2 = uint32_t(hi), f2 = uint32_t(hi >> 32);
#endif
  *data = uint64_t(d1) | (uint64_t(d2) << 32);
  return f1 == flag && f2 == flag;
}
/// The flag-wrap cleanup of one slot (above): lines [from, to) get `flag`, each thread of a
/// block taking every blockDim-th line.
TCCL_HOST_DEVICE inline void llCleanLines(LLLine* slot, int from, int to, uint32_t flag) {
#if defined(__CUDA_ARCH__)
  for (int i = from + int(threadIdx.x); i < to; i += int(blockDim.x)) llStoreLine(slot + i, 0, flag);
#else
  for (int i = from; i < to; i++) llStoreLine(slot + i, 0, flag);
#endif
}

// ---- The LL128 protocol's slots (stage 5; device/prims_ll128.h runs them) ------------------
// A slot is kLL128SlotLines lines of 128 bytes: sixteen 8-byte words, of which the last is the
// flag and the other fifteen data (120 bytes). Eight threads of a warp write a line together,
// 16 bytes each, in one store instruction; the flag rides in the eighth thread's second word.
// The reader loads the line the same way and trusts all of it once the flag is the step's:
// that needs the 128-byte line to land at once, which NVLink between GPUs of one architecture
// provides and PCIe does not (NCCL enables LL128 only there, and so does tccl: tuning.cc).
// So the data needs no fence and no tail, as LL's, but only 1/16 of the bytes are flags.

constexpr int kLL128LineWords = 16;                        // 8-byte words per line
constexpr int kLL128DataWords = kLL128LineWords - 1;       // the last is the flag
// A step is 2048 lines, 240 KiB of data: four lines per thread of a 512-thread block, so that
// the barrier and head that end a step are paid once per 240 KiB (NCCL's LL128 step is about
// twice that, for 640 threads).
constexpr int kLL128SlotLines = 2048;
constexpr size_t kLL128StepBytes = size_t(kLL128SlotLines) * kLL128DataWords * 8;  // 245,760
constexpr size_t kLL128BuffBytes = size_t(kNSteps) * kLL128SlotLines * kLL128LineWords * 8;

// The flag of step s carries the step's byte count (at most 245,760: 18 bits) above the step
// number (46 bits), so the reader checks the size with the same compare that checks the data
// is there: a line whose step matches and whose size does not is a send and a receive of
// different sizes (WorkStatus::kSizeMismatch). Step numbers wrap after 2^46 steps, two years
// of steps at one per microsecond; lines start zeroed and s + 1 >= 1, so no line is valid before its step
// is written.
TCCL_HOST_DEVICE inline uint64_t ll128Flag(uint64_t step, uint64_t bytes) {
  return (bytes << 46) | ((step + 1) & ((uint64_t(1) << 46) - 1));
}
TCCL_HOST_DEVICE inline uint64_t* ll128Slot(const ConnInfo* c, uint64_t step) {
  return reinterpret_cast<uint64_t*>(c->ll128Buff) +
         (step % kNSteps) * size_t(kLL128SlotLines) * kLL128LineWords;
}

// ---- Memory ordering helpers ---------------------------------------------------------------
// The counters are read by another agent (the proxy thread, a GPU, a peer): a producer must
// make its slot writes visible before the counter moves (release), and a consumer must not read
// the slot before it has seen the counter (acquire). On the GPU the other agent may be the CPU,
// so the scope is the whole system (.sys). (Stage 5: a kernel publishes tail at GPU scope when
// the consumer's kernel shares its GPU, and head with a relaxed store: device_backend.cuh.)

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

#if !defined(__CUDA_ARCH__)
/// Direct receive, consumer side (host only: kernels never use direct mode): offer `dst`
/// (`bytes` long) for the bytes of `step`, which must not be consumed yet and must be below
/// head + kNSteps, so that its slot's previous step is done with. Returns true when the step
/// will land in dst (this offer won, or an earlier offer of the same step did), false when the
/// proxy had already claimed it for the staging slot (the consumer then copies from the slot).
inline bool offerRecvStep(ConnFifo* f, uint64_t step, char* dst, int64_t bytes) {
  const int slot = int(step % kNSteps);
  uint64_t seen = __atomic_load_n(&f->claims[slot], __ATOMIC_ACQUIRE);
  if (seen == claimValue(step, kClaimByConsumer)) return true;  // pre-posted at launch
  // (Who is 0 only in the initial value: nobody has claimed any step of this slot yet.)
  if ((seen >> 2) == step && (seen & 3) != 0) return false;     // the proxy was first
  // Nobody reads ptrs/ptrSizes of this step before it is claimed for us, below.
  f->ptrs[slot] = dst;
  f->ptrSizes[slot] = bytes;
  // Release: ptrs/ptrSizes are visible to the proxy once it sees our claim. A failed CAS means
  // the proxy claimed the step just now: it stages, and never looks at ptrs.
  return __atomic_compare_exchange_n(&f->claims[slot], &seen, claimValue(step, kClaimByConsumer),
                                     false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
#endif

/// Receive side, host consumer: the steps below `end` may be staged in the slots (they feed a
/// reduction or a forward, which read the slot). Only the consumer writes `staged`. (Host
/// only, like the offers: kernels never decide, see receiveDestination.)
TCCL_HOST_DEVICE inline void allowStaging(ConnFifo* f, uint64_t end) {
#if !defined(__CUDA_ARCH__)
  if (end > f->staged) __atomic_store_n(&f->staged, end, __ATOMIC_RELEASE);
#endif
}

/// Direct receive, consumer side: the offers of one receive of `bytes` into `dst`, made ahead
/// step by step (a pre-posted receive). Steps are cut as the primitives cut them: `stepBytes`
/// each, the last one shorter. The primitive and the launcher's pre-post (p2p.h) both offer
/// through here, so the two can never cut the same receive differently.
struct RecvOffers {
  uint64_t next;        // the next step to offer
  size_t offered = 0;   // bytes of dst offered so far
  uint32_t won = 0;     // bit (step % kNSteps): that step will land in dst

  TCCL_HOST_DEVICE bool landed(uint64_t step) const { return (won >> (step % kNSteps)) & 1u; }

  /// Offers the steps below `end` while bytes remain (host only: kernels never offer).
  TCCL_HOST_DEVICE void offerUpTo(ConnFifo* f, uint64_t stepBytes, char* dst, size_t bytes,
                                  uint64_t end) {
#if !defined(__CUDA_ARCH__)
    for (; next < end && offered < bytes; next++) {
      const size_t m = (bytes - offered < stepBytes) ? bytes - offered : stepBytes;
      const uint32_t bit = 1u << (next % kNSteps);
      won = offerRecvStep(f, next, dst + offered, int64_t(m)) ? (won | bit) : (won & ~bit);
      offered += m;
    }
#endif
  }
};

}  // namespace tccl

#endif  // TCCL_DEVICE_FIFO_H_
