/*
 * bench/perf_common.h: what tccl_perf and tccl_mpi_perf share, so that their tables are made
 * the same way and can be compared line by line: the command-line options, the sweep of sizes,
 * the test data and its check, the buffer sizes of the point-to-point operations, how a time
 * is combined over ranks, and the table itself.
 *
 * Invariants: header-only, included by exactly one source file per program (everything is
 * inline). It knows nothing of tccl or CUDA: tccl_mpi_perf links MPI only. The byte at offset
 * i of the block rank src sends to rank dst depends only on (src, dst, i), so a receiver checks
 * every byte without being sent the input.
 *
 * NCCL counterpart: nccl-tests src/common.h (and the shared parts of src/common.cu).
 * Added in: stage 1.
 */
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace perf {

// ---- Buffer sizes ----------------------------------------------------------------------------
/// Buffer sizes of one test point: from the requested total count (bytes / type size) to what
/// the call gets (nccl-tests getCollByteCount). Counts are in elements.
struct Counts {
  size_t send;   // elements in sendbuff
  size_t recv;   // elements in recvbuff
  size_t param;  // the count argument of the call (nccl-tests' "paramcount")
  // In place: one buffer of max(send, recv) elements; sendbuff and recvbuff start at these
  // element offsets in it (nccl-tests getInplaceOffset: allgather sends from recv + rank*count).
  size_t inPlaceSendOffset = 0, inPlaceRecvOffset = 0;
};

// ---- Test data -------------------------------------------------------------------------------
/// The data byte at `offset` of the block that rank `src` sends towards rank `dst`.
inline uint8_t dataByte(int src, int dst, size_t offset) {
  uint64_t x = (uint64_t(src) << 40) ^ (uint64_t(dst) << 20) ^ offset;
  x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ull;
  return uint8_t(x >> 56);
}
inline void fillBlock(uint8_t* p, size_t bytes, int src, int dst) {
  for (size_t i = 0; i < bytes; i++) p[i] = dataByte(src, dst, i);
}
/// Elements (of typeSize bytes) of a received block that differ from what src sent to dst.
inline size_t wrongInBlock(const uint8_t* p, size_t count, size_t typeSize, int src, int dst) {
  size_t wrong = 0;
  for (size_t e = 0; e < count; e++)
    for (size_t b = 0; b < typeSize; b++)
      if (p[e * typeSize + b] != dataByte(src, dst, e * typeSize + b)) {
        wrong++;
        break;
      }
  return wrong;
}

// ---- The point-to-point operations: sizes, busbw factor, input, check ------------------------
// sendrecv: the shift of nccl-tests' sendrecv_perf: send to rank+1, receive from rank-1.
inline Counts sendRecvCounts(size_t count, int) { return {count, count, count}; }
inline double busBwOne(int) { return 1.0; }
inline void sendRecvFill(uint8_t* send, const Counts& c, size_t ts, int rank, int nranks) {
  fillBlock(send, c.param * ts, rank, (rank + 1) % nranks);
}
inline size_t sendRecvCheck(const uint8_t* recv, const Counts& c, size_t ts, int rank, int nranks) {
  return wrongInBlock(recv, c.param, ts, (rank + nranks - 1) % nranks, rank);
}

// alltoall: nranks blocks of `param` elements each way; bytes = the whole buffer.
inline Counts alltoAllCounts(size_t count, int nranks) {
  size_t param = count / size_t(nranks);
  return {param * nranks, param * nranks, param};
}
inline double busBwAlltoAll(int nranks) { return double(nranks - 1) / nranks; }
inline void alltoAllFill(uint8_t* send, const Counts& c, size_t ts, int rank, int nranks) {
  for (int j = 0; j < nranks; j++) fillBlock(send + j * c.param * ts, c.param * ts, rank, j);
}
inline size_t alltoAllCheck(const uint8_t* recv, const Counts& c, size_t ts, int rank, int nranks) {
  size_t wrong = 0;
  for (int i = 0; i < nranks; i++)
    wrong += wrongInBlock(recv + i * c.param * ts, c.param, ts, i, rank);
  return wrong;
}

// ---- Options -----------------------------------------------------------------------------------
/// The command line of both programs (nccl-tests' letters). The op and type stay names here:
/// each program looks them up in its own table.
struct Options {
  std::string op = "sendrecv";                                   // -t
  std::string type = "float";                                    // -d (float, as nccl-tests)
  size_t minBytes = 32, maxBytes = 32u << 20, stepBytes = 0;     // -b, -e, -i
  double factor = 2;                                             // -f
  int iters = 20, warmup = 5, check = 1, average = 1, root = 0;  // -n, -w, -c, -a, -r
  bool device = false;                                           // -m host|device
};

/// "64", "8K", "1M", "2G" (powers of 1024) -> bytes.
inline size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end != nullptr ? *end : '\0') {
    case 'G':
    case 'g':
      v *= 1024.0;  // fall through
    case 'M':
    case 'm':
      v *= 1024.0;  // fall through
    case 'K':
    case 'k':
      v *= 1024.0;
      break;
    default:
      break;
  }
  return size_t(v);
}

/// The option lines of both programs' usage (each prints its own first line: ops and types).
inline const char* optionsUsage() {
  return "  [-b minbytes] [-e maxbytes] [-f factor | -i stepbytes] [-n iters] [-w warmup]\n"
         "  [-c 0|1] [-d type] [-m host|device] [-a 0..3] [-r root]\n"
         "  -a: time over ranks 0=rank 0, 1=average, 2=min, 3=max\n";
}

/// Parses argv into *o; false on an unknown option or inconsistent sizes.
inline bool parseOptions(int argc, char** argv, Options* o) {
  int c;
  while ((c = getopt(argc, argv, "t:b:e:f:i:n:w:c:d:m:a:r:h")) != -1) {
    switch (c) {
      case 't':
        o->op = optarg;
        break;
      case 'd':
        o->type = optarg;
        break;
      case 'b':
        o->minBytes = parseSize(optarg);
        break;
      case 'e':
        o->maxBytes = parseSize(optarg);
        break;
      case 'f':
        o->factor = std::atof(optarg);
        break;
      case 'i':
        o->stepBytes = parseSize(optarg);
        break;
      case 'n':
        o->iters = std::atoi(optarg);
        break;
      case 'w':
        o->warmup = std::atoi(optarg);
        break;
      case 'c':
        o->check = std::atoi(optarg);
        break;
      case 'a':
        o->average = std::atoi(optarg);
        break;
      case 'r':
        o->root = std::atoi(optarg);
        break;
      case 'm':
        if (std::strcmp(optarg, "device") == 0) {
          o->device = true;
        } else if (std::strcmp(optarg, "host") != 0) {
          return false;
        }
        break;
      default:
        return false;
    }
  }
  return o->iters > 0 && o->warmup >= 0 && o->minBytes <= o->maxBytes &&
         (o->stepBytes > 0 || o->factor > 1.0);
}

/// Moves *bytes to the next size of the sweep (-i step or -f factor); false when the sweep is
/// over. The sweep starts at -b, which parseOptions made sure is <= -e.
inline bool nextSize(size_t* bytes, const Options& o) {
  size_t next = o.stepBytes ? *bytes + o.stepBytes : size_t(double(*bytes) * o.factor);
  if (next <= *bytes || next > o.maxBytes) return false;
  *bytes = next;
  return true;
}

// ---- Timing and the table ----------------------------------------------------------------------
/// Combines a per-rank time as nccl-tests -a: 0 rank 0's, 1 average, 2 min, 3 max.
inline double combineTime(double t, int how, int nranks) {
  double out = t;
  if (how == 0) {
    MPI_Bcast(&out, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  } else {
    MPI_Op op = how == 2 ? MPI_MIN : how == 3 ? MPI_MAX : MPI_SUM;
    MPI_Allreduce(&t, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    if (how == 1) out /= nranks;
  }
  return out;
}

/// One column group of the table: time per call and the summed wrong elements.
struct Result {
  double sec = 0;        // per call, combined over ranks
  long long wrong = -1;  // -1: not checked
  double busBw(size_t bytes, double factor) const {
    return sec > 0 ? double(bytes) / sec / 1e9 * factor : 0.0;
  }
};

/// The column titles, as nccl-tests prints them (rank 0 only).
inline void printTableHeader() {
  std::printf(
      "#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
      "in-place          \n",
      "", "", "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
              "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
              "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "");
  std::fflush(stdout);
}

/// One column group; N/A everywhere when the form (in place) does not apply.
inline void printResult(const Result& r, bool applies, size_t bytes, double factor) {
  if (!applies) {
    std::printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  std::string w = r.wrong < 0 ? "N/A" : std::to_string(r.wrong);
  std::printf("  %7.2f  %6.2f  %6.2f  %5s", r.sec * 1e6, r.busBw(bytes, 1.0),
              r.busBw(bytes, factor), w.c_str());
}

/// One line of the table (rank 0 only): bytes = the larger buffer, as nccl-tests reports it.
inline void printRow(size_t bytes, size_t typeSize, const char* typeName, const Result& outOfPlace,
                     const Result& inPlace, bool inPlaceApplies, double busBwFactor) {
  std::printf("  %10zu  %12zu  %8s  %6s  %6s", bytes, bytes / typeSize, typeName, "none", "-1");
  printResult(outOfPlace, true, bytes, busBwFactor);
  printResult(inPlace, inPlaceApplies, bytes, busBwFactor);
  std::printf("\n");
  std::fflush(stdout);
}

/// The last lines (rank 0 only): the check's verdict and the average bus bandwidth.
inline void printFooter(long long totalWrong, double busBwSum, int points) {
  std::printf("# Out of bounds values : %lld %s\n", totalWrong, totalWrong ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n#\n", points ? busBwSum / points : 0.0);
}

}  // namespace perf
