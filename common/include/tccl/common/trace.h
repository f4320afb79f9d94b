/*
 * common/trace.h: the step-timeline recorder behind TCCL_TRACE_FILE.
 *
 * What it is: a process-wide, bounded recorder of timed spans ("this fiber waited for step 5
 * from rank 2 from t0 to t1") that it writes out in the Chrome trace-event JSON format, which
 * Perfetto (ui.perfetto.dev) and chrome://tracing open. The library decides what to record
 * (src/trace.cc of each stage); this file only keeps events and writes them:
 *
 *   TCCL_TRACE_FILE=path.%h.%p   where to write (%h host, %p pid, as TCCL_DEBUG_FILE); unset:
 *                                nothing is recorded and every hook costs one predictable branch
 *   TCCL_TRACE_EVENTS=N          events kept per process (default 262144, about 20 MiB); when
 *                                more arrive the oldest are dropped and the count of dropped
 *                                events is written into the file
 *
 * In the file, a trace "process" (pid) is one rank of one communicator and a "thread" (tid) is
 * one lane of it: the API calls, one executor lane per host fiber or GPU thread block, one
 * lane per proxy connection. Times are CLOCK_MONOTONIC, which every process of one host
 * shares, so the files of one host's ranks line up as they are; each rank also writes its
 * clock's offset to rank 0's (measured over the bootstrap) for tools/trace to align hosts.
 *
 * Invariants:
 *  - Memory is bounded: a ring of TCCL_TRACE_EVENTS events, allocated when tracing starts.
 *  - Recording is thread-safe (one mutex: the executor, the proxy and a CUDA callback thread
 *    record concurrently) and never fails; a file that cannot be written gives a WARN.
 *  - The file is written by traceFlush() (tcclCommDestroy calls it) and again at normal
 *    process exit if events arrived since; every write holds every event still kept.
 *
 * NCCL counterpart: NCCL's proxy profiler and the profiler plugin API (src/plugin/profiler,
 * NCCL_PROFILER_PLUGIN), which report similar events to an external tool; NCCL has no
 * built-in timeline file.
 * Added in: stage 1 (observability).
 */
#ifndef TCCL_COMMON_TRACE_H_
#define TCCL_COMMON_TRACE_H_

#include <time.h>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace tccl {

/// An argument slot that is not written to the file.
constexpr int64_t kTraceNoArg = INT64_MIN;
/// Arguments per event.
constexpr int kTraceArgs = 8;

/// One recorded span. Plain data: recording is a copy into the ring.
struct TraceEvent {
  uint64_t t0, t1;  // ns, CLOCK_MONOTONIC (traceNowNs)
  int32_t pid, tid;
  uint16_t name;    // from traceName()
  int64_t args[kTraceArgs];  // labelled by the name's schema; kTraceNoArg: left out
};

/// True when TCCL_TRACE_FILE is set (read once per process).
bool traceEnabled();

/// Now, in nanoseconds of CLOCK_MONOTONIC (inline: the executors read it at every step).
inline uint64_t traceNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

/// Registers an event name with its category and the labels of its arguments (at most
/// kTraceArgs). A label starting with '$' marks a string argument: its value is an id from
/// traceString(). Returns the same id for the same name on every call.
uint16_t traceName(const char* name, const char* category,
                   std::initializer_list<const char*> argLabels);

/// An id for a string argument value ("float32", "ring").
int64_t traceString(const char* s);

/// Names a lane (idempotent; the first name given to a (pid, tid) wins).
void traceTrack(int pid, int tid, const std::string& name);

/// Describes a trace process: one rank of one communicator.
struct TraceRank {
  int pid;
  int rank;
  int nranks;
  uint64_t commHash;
  uint64_t hostHash;
  double clockOffsetUs;  // this rank's clock minus rank 0's (0 when they share a host)
  double clockErrUs;     // the offset is exact within +- this (half the fastest round trip)
  int clockPings;        // ping-pongs measured (0: rank 0, or a rank sharing rank 0's clock)
};
void traceRank(const TraceRank& r);

/// The pid for `rank` of the communicator identified by `commHash`: 1000 * k + rank, where k
/// counts the distinct communicators this process has traced so far.
int tracePid(uint64_t commHash, int rank);

/// Records one span (no-op when tracing is off).
void traceRecord(const TraceEvent& e);

/// Counts events lost before they reached the recorder (a GPU block's full buffer).
void traceCountDropped(uint64_t n);

/// Writes the file now (all events still kept). A WARN, never an error, if it cannot.
void traceFlush();

}  // namespace tccl

#endif  // TCCL_COMMON_TRACE_H_
