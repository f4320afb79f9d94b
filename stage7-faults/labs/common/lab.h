/*
 * labs/common/lab.h: what every lab program shares -- its seed, its rank, the world
 * communicator, and the seeded choices that make each learner's instance different.
 *
 * What it is: a lab program (labs/NN-name/lab.cc) is started by tools/lab, torchrun-style:
 * one process per rank with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set, plus
 *   LAB_SEED  the learner's seed (it picks which rank, which operation, which detail),
 *   LAB_FIX   1: run with the reference fix (the lab's self-test, and the grader, use it).
 * labPick(seed, i, n) is the i-th seeded choice in [0, n): tools/lab's pick() computes the
 * same numbers in Python, so the grader knows the instance without asking the program.
 *
 * Invariants: a lab prints what a user would see, prefixed "[rank r]", and exits 0 when it
 * finished as a correct program would (the reference fix), non-zero otherwise; it never hangs
 * for ever (the lab's TCCL_TIMEOUT, and tools/lab's own deadline, bound it).
 *
 * NCCL counterpart: none (a teaching device). Added in: stage 7.
 */
#ifndef TCCL_LAB_H_
#define TCCL_LAB_H_

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tccl.h"

namespace lab {

/// splitmix64: a seed's choices (tools/lab has the same function).
inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The index-th seeded choice, in [0, n).
inline int pick(uint64_t seed, int index, int n) {
  return int(mix(seed * 0x9E3779B97F4A7C15ull + uint64_t(index)) % uint64_t(n));
}

struct Lab {
  uint64_t seed = 0;
  bool fixed = false;  // LAB_FIX=1: the reference fix
  int rank = 0;
  int nranks = 1;
  tcclComm_t comm = nullptr;
};

/// "[rank r] ..." on stdout, flushed (the ranks' lines interleave in the lab's log).
inline void say(const Lab& l, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  printf("[rank %d] %s\n", l.rank, buf);
  fflush(stdout);
}

/// Reads the environment; creates the world communicator unless `makeComm` is false.
/// Returns false (after saying why) when the environment or the init fails.
inline bool init(Lab* l, bool makeComm = true) {
  const char* seed = getenv("LAB_SEED");
  const char* rank = getenv("RANK");
  const char* size = getenv("WORLD_SIZE");
  if (seed == nullptr || rank == nullptr || size == nullptr) {
    fprintf(stderr, "start labs with tools/lab run (LAB_SEED, RANK, WORLD_SIZE are not set)\n");
    return false;
  }
  l->seed = strtoull(seed, nullptr, 10);
  l->rank = atoi(rank);
  l->nranks = atoi(size);
  const char* fix = getenv("LAB_FIX");
  l->fixed = fix != nullptr && std::string(fix) == "1";
  if (!makeComm) return true;
  const tcclResult_t r = tcclCommInitFromEnv(&l->comm);
  if (r != tcclSuccess) {
    say(*l, "tcclCommInitFromEnv failed: %s (%s)", tcclGetErrorString(r),
        tcclGetLastError(nullptr));
    return false;
  }
  return true;
}

/// A call's result as a user would print it; true on success.
inline bool ok(const Lab& l, tcclResult_t r, const char* what) {
  if (r == tcclSuccess) return true;
  say(l, "%s failed: %s: %s", what, tcclGetErrorString(r),
      l.comm ? tcclGetLastError(l.comm) : tcclGetLastError(nullptr));
  return false;
}

/// A communicator's end as a careful program has it: destroyed when all went well, aborted
/// otherwise (its operations may still wait on peers that will not come). Null is skipped.
inline void end(tcclComm_t comm, bool good) {
  if (comm == nullptr) return;
  if (good) {
    tcclCommDestroy(comm);
  } else {
    tcclCommAbort(comm);
  }
}

/// The program's end: the world communicator's flight recorder written (TCCL_FR_DUMP, which
/// tools/lab sets, unless `dump` is false), the communicator ended; the exit code.
inline int finish(const Lab& l, bool good, bool dump = true) {
  if (dump) tcclCommDumpFlightRecorder(l.comm, nullptr);
  end(l.comm, good);
  return good ? 0 : 1;
}

}  // namespace lab

#endif  // TCCL_LAB_H_
