/*
 * device/trace_record.h: what an executor records for the step timeline, on the host and on the GPU.
 *
 * What it is: the record the primitives write when TCCL_TRACE_FILE is set (common/trace.h
 * writes the file). Per primitive call one span (which call, the algorithm's chunk index,
 * bytes); per FIFO step up to three spans: the consumer's wait until the producer published
 * the step, the producer's wait for a free slot, and the step's data movement (a copy).
 * Together they show the pipeline: while rank r copies step s, step s+1 is already on its way.
 *
 * The host backend turns each record into a trace event at once (src/trace.cc). A GPU thread
 * block cannot call the host, so its leader thread appends records to a bounded per-block
 * TraceBuffer in mapped host memory, stamped with %globaltimer; after the kernel the host
 * converts them to CLOCK_MONOTONIC with an offset calibrated once per communicator (see
 * traceCalibrateGpuClock) and records them the same way.
 *
 * Invariants:
 *  - Tracing off costs one branch per primitive call and per step: traceNow() returns 0 and
 *    no record is built (the backend's `trace` pointer is null).
 *  - Step numbers are the connection's own (ConnInfo::step): both ends number a step alike,
 *    across operations, so tools/trace can pair a producer's publish with the consumer's wait.
 *  - A data-movement record ends just before the producer's tail store, and a wait record ends
 *    just after the consumer saw tail move: on one clock, wait end >= publish (causality).
 *  - A TraceBuffer holds at most `cap` records; a block that writes more overwrites its oldest
 *    (`count` keeps counting, so the host knows how many were lost).
 *
 * NCCL counterpart: the device-side profiler events of src/device/prims_simple.h
 * (NCCL_PROFILER / proxy profiling) and src/include/profiler.h.
 * Added in: stage 1 (observability).
 */
#ifndef TCCL_DEVICE_TRACE_RECORD_H_
#define TCCL_DEVICE_TRACE_RECORD_H_

#include <cstdint>

#include "device/fifo.h"

namespace tccl {

/// What a TraceRecord describes: a primitive call, or one step of one.
enum class TraceWhat : uint8_t {
  // Primitive calls (device/primitives.h), one span per call.
  kSend,
  kRecv,
  kCopySend,
  kRecvCopySend,
  // FIFO steps.
  kWaitRecv,  // consumer: until tail > step
  kWaitSend,  // producer: until head + kNSteps > step
  kCopy,      // the step's bytes moved
  kCount
};

/// A step number that does not apply to a record.
constexpr uint64_t kTraceNoStep = ~uint64_t(0);

/// One span. Host: ns of CLOCK_MONOTONIC; GPU: ns of %globaltimer until the host converts it.
struct TraceRecord {
  uint64_t t0, t1;
  uint64_t recvStep;  // the step received (waited for), or kTraceNoStep
  uint64_t sendStep;  // the step produced (waited a slot for), or kTraceNoStep
  int64_t bytes;
  int32_t chunk;      // primitive calls: the algorithm's chunk index (-1: none)
  int16_t recvPeer;   // the ranks at the ends of the call's connections (-1: none)
  int16_t sendPeer;
  int16_t channel;
  uint8_t what;       // TraceWhat
};

/// One GPU thread block's records, in mapped host memory (the kernel writes, the host reads
/// after the kernel has finished).
struct TraceBuffer {
  uint32_t count;  // records the block wrote; more than cap means the oldest were overwritten
  uint32_t cap;
  TraceRecord* recs;
};

/// Records per GPU thread block and launch (a kernel's block writes at most this many).
constexpr uint32_t kTraceRecsPerBlock = 4096;

}  // namespace tccl

#endif  // TCCL_DEVICE_TRACE_RECORD_H_
