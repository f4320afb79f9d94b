/*
 * bench/perf_collectives.h: the data side of tccl_perf's collectives: for allreduce,
 * allgather, reducescatter, broadcast and reduce, the buffer sizes of a test point, the busbw
 * factor, the input each rank sends and the check of what it receives. (Which tccl call each
 * one makes, and the kOps entries, are in tccl_perf.cc.)
 *
 * Invariants: header-only, included by tccl_perf.cc only. Reductions are checked on typed
 * values: small integers (1..3), exact in every type, so the sum over up to 8 ranks is exact
 * too and the check compares bytes. The copies (allgather, broadcast) use perf_common.h's
 * byte pattern. gType and gRoot are the run's -d and -r; tccl_perf sets them before the first
 * fill (the fill and check signatures are the same for every operation).
 *
 * NCCL counterpart: nccl-tests src/all_reduce.cu, all_gather.cu, reduce_scatter.cu,
 * broadcast.cu, reduce.cu (their GetCollByteCount, GetBw, InitData).
 * Added in: stage 2.
 */
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "perf_common.h"
#include "tccl.h"

namespace perf {

inline tcclDataType_t gType = tcclFloat32;  // -d
inline int gRoot = 0;                       // -r

/// Element i of the input of rank `rank`.
inline double valueOf(int rank, size_t i) { return double(1 + (size_t(rank) + i) % 3); }

/// Writes v as element i of a gType array.
inline void storeValue(uint8_t* p, size_t i, double v) {
  const float f = float(v);
  uint32_t fb;
  std::memcpy(&fb, &f, 4);
  switch (gType) {
    case tcclInt8:
    case tcclUint8:
      p[i] = uint8_t(v);
      break;
    case tcclInt32:
    case tcclUint32: {
      uint32_t x = uint32_t(v);
      std::memcpy(p + 4 * i, &x, 4);
      break;
    }
    case tcclInt64:
    case tcclUint64: {
      uint64_t x = uint64_t(v);
      std::memcpy(p + 8 * i, &x, 8);
      break;
    }
    case tcclFloat32:
      std::memcpy(p + 4 * i, &f, 4);
      break;
    case tcclFloat64:
      std::memcpy(p + 8 * i, &v, 8);
      break;
    case tcclBfloat16: {
      uint16_t h = uint16_t(fb >> 16);
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    case tcclFloat16: {  // exact for the small integers used here
      uint16_t h = v == 0 ? 0 : uint16_t(((fb >> 23) - 112) << 10 | ((fb >> 13) & 0x3ff));
      std::memcpy(p + 2 * i, &h, 2);
      break;
    }
    default:
      break;
  }
}

/// Elements of `got` (count from element `first` of the expected sequence) that differ from
/// the sum over ranks.
inline size_t wrongValues(const uint8_t* got, size_t count, size_t ts, size_t first, int nranks) {
  std::vector<uint8_t> want(ts);
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) {
    double sum = 0;
    for (int r = 0; r < nranks; r++) sum += valueOf(r, first + i);
    storeValue(want.data(), 0, sum);
    if (std::memcmp(got + i * ts, want.data(), ts) != 0) wrong++;
  }
  return wrong;
}
/// The input of the reductions.
inline void valuesFill(uint8_t* send, const Counts& c, size_t, int rank, int) {
  for (size_t i = 0; i < c.send; i++) storeValue(send, i, valueOf(rank, i));
}
/// The input of the copies: one block of the byte pattern, as if sent to rank 0.
inline void blockFill(uint8_t* send, const Counts& c, size_t ts, int rank, int) {
  fillBlock(send, c.param * ts, rank, 0);
}
inline double busBwAllReduce(int nranks) { return 2.0 * (nranks - 1) / nranks; }
inline double busBwGather(int nranks) { return double(nranks - 1) / nranks; }

// allreduce (sum): busbw = algbw * 2(n-1)/n. reduce and broadcast use the same sizes.
inline Counts allReduceCounts(size_t count, int) { return {count, count, count}; }
inline size_t allReduceCheck(const uint8_t* recv, const Counts& c, size_t ts, int, int nranks) {
  return wrongValues(recv, c.param, ts, 0, nranks);
}

// allgather: nranks blocks of `param`; bytes = the whole receive buffer.
inline Counts allGatherCounts(size_t count, int nranks) {
  size_t param = count / size_t(nranks);
  return {param, param * nranks, param};
}
inline size_t allGatherCheck(const uint8_t* recv, const Counts& c, size_t ts, int, int nranks) {
  size_t wrong = 0;
  for (int i = 0; i < nranks; i++)
    wrong += wrongInBlock(recv + i * c.param * ts, c.param, ts, i, 0);
  return wrong;
}

// reducescatter (sum): rank r gets block r of the reduction; bytes = the whole send buffer.
inline Counts reduceScatterCounts(size_t count, int nranks) {
  size_t param = count / size_t(nranks);
  return {param * nranks, param, param};
}
inline size_t reduceScatterCheck(const uint8_t* recv, const Counts& c, size_t ts, int rank,
                                 int nranks) {
  return wrongValues(recv, c.param, ts, size_t(rank) * c.param, nranks);
}

// broadcast from -r: busbw = algbw; every rank gets the root's block.
inline size_t broadcastCheck(const uint8_t* recv, const Counts& c, size_t ts, int, int) {
  return wrongInBlock(recv, c.param, ts, gRoot, 0);
}

// reduce (sum) to -r: busbw = algbw; only the root's output is checked.
inline size_t reduceCheck(const uint8_t* recv, const Counts& c, size_t ts, int rank, int nranks) {
  return rank == gRoot ? wrongValues(recv, c.param, ts, 0, nranks) : 0;
}

}  // namespace perf
