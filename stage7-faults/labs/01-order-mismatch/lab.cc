/*
 * labs/01-order-mismatch/lab.cc: lab 1 -- the ranks issue their collectives in different
 * orders. See README.md for the story; this is the program with the bug.
 *
 * What it is: the training loop of a toy data-parallel job. Every step all-reduces the
 * gradients (4096 floats) and all-gathers a metric (8 floats per rank); every third step
 * rank 0 broadcasts a learning-rate update (4 floats). On one rank, chosen by the seed, two
 * neighbouring collectives, also chosen by the seed, are issued in the other order -- as
 * when a rank takes another branch through the code (an `if` on rank-local state). With
 * LAB_FIX=1 every rank keeps the order.
 *
 * Invariants: the schedule below and ops() in lab.py are the same list; the program always
 * writes its flight recorder at the end (TCCL_FR_DUMP, set by tools/lab), as a careful
 * training script does on failure; exit 0 only when every result is right.
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

enum Op { kAllReduce, kAllGather, kBroadcast };
const char* kNames[] = {"all-reduce(gradients)", "all-gather(metric)", "broadcast(lr)"};

std::vector<Op> schedule() {
  std::vector<Op> ops;
  for (int step = 0; step < 4; step++) {
    ops.push_back(kAllReduce);
    ops.push_back(kAllGather);
    if (step % 3 == 2) ops.push_back(kBroadcast);
  }
  return ops;
}

}  // namespace

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  std::vector<Op> ops = schedule();
  // The instance: which rank swaps, and where (two neighbours of different kinds).
  std::vector<int> places;
  for (size_t i = 0; i + 1 < ops.size(); i++) {
    if (ops[i] != ops[i + 1]) places.push_back(int(i));
  }
  const int bad = lab::pick(l.seed, 0, l.nranks);
  const int at = places[size_t(lab::pick(l.seed, 1, int(places.size())))];
  if (!l.fixed && l.rank == bad) std::swap(ops[size_t(at)], ops[size_t(at) + 1]);

  std::vector<float> grads(4096), metric(8), metrics(8 * size_t(l.nranks)), lr(4);
  bool good = true;
  for (size_t i = 0; i < ops.size() && good; i++) {
    tcclResult_t r = tcclSuccess;
    switch (ops[i]) {
      case kAllReduce:
        for (float& g : grads) g = float(l.rank + 1);
        r = tcclAllReduce(grads.data(), grads.data(), grads.size(), tcclFloat32, tcclSum, l.comm,
                          nullptr);
        if (r == tcclSuccess && grads[0] != float(l.nranks * (l.nranks + 1) / 2)) {
          lab::say(l, "wrong result after %s: %g", kNames[ops[i]], double(grads[0]));
          good = false;
        }
        break;
      case kAllGather:
        for (float& m : metric) m = float(10 * l.rank);
        r = tcclAllGather(metric.data(), metrics.data(), metric.size(), tcclFloat32, l.comm,
                          nullptr);
        if (r == tcclSuccess && metrics[8 * size_t(l.nranks - 1)] != float(10 * (l.nranks - 1))) {
          lab::say(l, "wrong result after %s: %g", kNames[ops[i]],
                   double(metrics[8 * size_t(l.nranks - 1)]));
          good = false;
        }
        break;
      case kBroadcast:
        for (float& x : lr) x = l.rank == 0 ? 0.5f : 0.0f;
        r = tcclBroadcast(lr.data(), lr.data(), lr.size(), tcclFloat32, 0, l.comm, nullptr);
        if (r == tcclSuccess && lr[0] != 0.5f) {
          lab::say(l, "wrong result after %s: %g", kNames[ops[i]], double(lr[0]));
          good = false;
        }
        break;
    }
    if (!lab::ok(l, r, kNames[ops[i]])) good = false;
  }
  if (good) lab::say(l, "training finished: %zu collectives", ops.size());
  return lab::finish(l, good);
}
