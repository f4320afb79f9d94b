/*
 * labs/09-straggler/lab.cc: lab 9 -- one rank arrives seconds late at a collective, and every
 * other rank's watchdog gives up on it. See README.md for the story; this is the training
 * script that meets it.
 *
 * What it is: the training loop of a toy data-parallel job: 6 steps, each all-reducing the
 * gradients (65536 floats) and all-gathering a metric (8 floats per rank) -- 12 collectives.
 * The delay is not in this file: tools/lab starts one rank, chosen by the seed, with
 * TCCL_FAULT=stall before the gradient all-reduce of a step chosen by the seed (lab.py:
 * rank_env), and the library sleeps TCCL_FAULT_DELAY_MS (2.5 s) as that rank calls it -- what
 * a slow checkpoint write, a data loader waiting on a cold file system, or a swapping host does
 * to one rank of a real job. TCCL_TIMEOUT is 1 s, so the others' watchdogs give up first:
 * their call fails with tcclRemoteError, and each watchdog writes its rank's flight recorder
 * as the operation stood. With LAB_FIX=1 nobody stalls.
 *
 * Invariants: the schedule below and ops() in lab.py are the same list; the program always
 * writes its flight recorder at the end (TCCL_FR_DUMP, set by tools/lab; a failed operation
 * keeps the state it reached there, so the dump still shows where each rank stopped); a failed
 * rank waits a second before it exits, so that its exit does not end its peers' calls before
 * their own watchdogs fire; exit 0 only when every result is right.
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <chrono>
#include <thread>
#include <vector>

namespace {

enum Op { kAllReduce, kAllGather };
const char* kNames[] = {"all-reduce(gradients)", "all-gather(metric)"};

std::vector<Op> schedule() {
  std::vector<Op> ops;
  for (int step = 0; step < 6; step++) {
    ops.push_back(kAllReduce);
    ops.push_back(kAllGather);
  }
  return ops;
}

}  // namespace

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  const std::vector<Op> ops = schedule();
  const size_t n = size_t(l.nranks);
  std::vector<float> grads(65536), metric(8), metrics(8 * n);
  bool good = true;
  for (size_t i = 0; i < ops.size() && good; i++) {
    tcclResult_t r = tcclSuccess;
    if (ops[i] == kAllReduce) {
      for (float& g : grads) g = float(l.rank + 1);
      r = tcclAllReduce(grads.data(), grads.data(), grads.size(), tcclFloat32, tcclSum, l.comm,
                        nullptr);
      if (r == tcclSuccess && grads.back() != float(l.nranks * (l.nranks + 1) / 2)) {
        lab::say(l, "wrong result after %s: %g", kNames[ops[i]], double(grads.back()));
        good = false;
      }
    } else {
      for (float& m : metric) m = float(10 * l.rank);
      r = tcclAllGather(metric.data(), metrics.data(), metric.size(), tcclFloat32, l.comm, nullptr);
      if (r == tcclSuccess && metrics[8 * (n - 1)] != float(10 * (l.nranks - 1))) {
        lab::say(l, "wrong result after %s: %g", kNames[ops[i]], double(metrics[8 * (n - 1)]));
        good = false;
      }
    }
    if (!lab::ok(l, r, kNames[ops[i]])) good = false;
  }
  if (good) lab::say(l, "training finished: %zu collectives", ops.size());
  tcclCommDumpFlightRecorder(l.comm, nullptr);
  if (good) {
    tcclCommDestroy(l.comm);
    return 0;
  }
  // Stay a moment, as PyTorch's watchdog waits for its dump before it tears the process down:
  // the peers' watchdogs fire within a tick of ours, and our exit, seen by their SHM transport,
  // would end their calls first -- with "rank R has exited", blaming an innocent rank.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  tcclCommAbort(l.comm);
  return 1;
}
