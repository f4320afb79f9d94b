/*
 * common/src/trace_clock.cc: the clock offset to rank 0 over the bootstrap. See trace_clock.h.
 *
 * Added in: stage 1 (observability).
 */
#include "tccl/common/trace_clock.h"

#include "tccl/common/debug.h"
#include "tccl/common/trace.h"

namespace tccl {

namespace {

// A bootstrap tag no other message uses (the transports' connection tags start at 0x10000).
constexpr uint32_t kClockTag = 0x7c10c;
constexpr int kTraceClockRounds = 16;

}  // namespace

tcclResult_t traceMeasureClockOffset(Bootstrap& b, int rank,
                                     const std::vector<uint64_t>& hostHashes,
                                     TraceClockOffset* out) {
  *out = TraceClockOffset{};
  const int nranks = int(hostHashes.size());
  if (rank == 0) {
    // Serve every rank on another host, in rank order (each one pings kTraceClockRounds times).
    for (int r = 1; r < nranks; r++) {
      if (hostHashes[r] == hostHashes[0]) continue;
      for (int i = 0; i < kTraceClockRounds; i++) {
        uint64_t ping, now;
        TCCL_CHECK(b.recv(r, kClockTag, &ping, sizeof(ping)));
        now = traceNowNs();
        TCCL_CHECK(b.send(r, kClockTag, &now, sizeof(now)));
      }
    }
    return tcclSuccess;
  }
  if (hostHashes[rank] == hostHashes[0]) return tcclSuccess;
  uint64_t best = ~uint64_t(0);
  for (int i = 0; i < kTraceClockRounds; i++) {
    const uint64_t t0 = traceNowNs();
    uint64_t theirs;
    TCCL_CHECK(b.send(0, kClockTag, &t0, sizeof(t0)));
    TCCL_CHECK(b.recv(0, kClockTag, &theirs, sizeof(theirs)));
    const uint64_t t1 = traceNowNs();
    if (t1 - t0 < best) {
      best = t1 - t0;
      out->offsetUs = (double(t0) + double(t1 - t0) / 2 - double(theirs)) / 1000.0;
    }
  }
  // A coarse clock (some VMs tick in microseconds) can make the fastest round trip read 0 and
  // the offset exactly 0: that is still a measurement, which is why the file counts the pings.
  out->errUs = double(best) / 2000.0;
  out->pings = kTraceClockRounds;
  TCCL_INFO(kInit, "trace: clock offset to rank 0 %.3f us (+- %.3f us)", out->offsetUs,
            out->errUs);
  return tcclSuccess;
}

uint64_t traceCommHash(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace tccl
