/*
 * common/trace_clock.h: a rank's clock offset to rank 0, for the step timeline across hosts.
 *
 * What it is: CLOCK_MONOTONIC is one clock per host, so the trace files of ranks on different
 * hosts do not line up by themselves. At init every rank whose host differs from rank 0's
 * measures its clock minus rank 0's over the bootstrap, NTP's way: kTraceClockRounds
 * ping-pongs, the fastest kept, offset = (t0 + t1) / 2 - t(rank 0), within +-(t1 - t0) / 2.
 * Each rank writes the result into its trace file (TraceRank) and tools/trace aligns hosts
 * with it.
 *
 * Invariants: every rank of the communicator calls it when any rank traces (rank 0 serves the
 * ranks on other hosts, in rank order, each for kTraceClockRounds rounds); ranks on rank 0's
 * host exchange nothing and get offset 0 with 0 pings (one clock, nothing to measure).
 *
 * NCCL counterpart: none (NCCL's profiler plugin leaves clocks to the tool).
 * Added in: stage 1 (observability).
 */
#ifndef TCCL_COMMON_TRACE_CLOCK_H_
#define TCCL_COMMON_TRACE_CLOCK_H_

#include <cstdint>
#include <vector>

#include "tccl/common/bootstrap.h"

namespace tccl {

/// What traceMeasureClockOffset found: our clock minus rank 0's, its error bound, and how many
/// ping-pongs it took (0 for rank 0 and for ranks on rank 0's host).
struct TraceClockOffset {
  double offsetUs = 0;
  double errUs = 0;
  int pings = 0;
};

/// Measures this rank's clock offset to rank 0; hostHashes[r] names rank r's host.
tcclResult_t traceMeasureClockOffset(Bootstrap& b, int rank,
                                     const std::vector<uint64_t>& hostHashes,
                                     TraceClockOffset* out);

/// The communicator's id in a trace file: a hash of its bootstrap secret (splitmix64), so the
/// file names the communicator without giving the secret away.
uint64_t traceCommHash(uint64_t secret);

}  // namespace tccl

#endif  // TCCL_COMMON_TRACE_CLOCK_H_
