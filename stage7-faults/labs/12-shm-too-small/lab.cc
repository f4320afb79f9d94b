/*
 * labs/12-shm-too-small/lab.cc: lab 12 -- the shared memory the ranks may use is smaller than
 * the SHM transport's FIFOs. See README.md for the story; this is the training script, and
 * there is nothing wrong with it.
 *
 * What it is: the training loop of a toy data-parallel job: 4 steps, each all-reducing the
 * gradients (65536 floats) and all-gathering a metric (8 floats per rank). The ranks share one
 * host, so their connections go over the SHM transport: each one a shared-memory segment of
 * TCCL_BUFFSIZE (4 MiB by default) plus a header, reserved when the first collective connects
 * the ranks. The fault is in the "container" the ranks run in (lab.py: WRAP), which allows
 * each rank less shared memory per segment than that -- a size chosen by the seed. Every
 * rank's first collective fails. With LAB_FIX=1 the ranks run with a TCCL_BUFFSIZE that fits.
 *
 * Invariants: nothing here depends on the seed (the bug is not in the program); the program
 * always writes its flight recorder at the end (TCCL_FR_DUMP, set by tools/lab); exit 0 only
 * when every result is right.
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <vector>

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  const size_t n = size_t(l.nranks);
  std::vector<float> grads(65536), metric(8), metrics(8 * n);
  bool good = true;
  for (int step = 0; step < 4 && good; step++) {
    for (float& g : grads) g = float(l.rank + 1);
    tcclResult_t r = tcclAllReduce(grads.data(), grads.data(), grads.size(), tcclFloat32, tcclSum,
                                   l.comm, nullptr);
    if (!lab::ok(l, r, "all-reduce(gradients)")) {
      good = false;
      break;
    }
    if (grads.back() != float(l.nranks * (l.nranks + 1) / 2)) {
      lab::say(l, "wrong result after all-reduce(gradients): %g", double(grads.back()));
      good = false;
      break;
    }
    for (float& m : metric) m = float(10 * l.rank);
    r = tcclAllGather(metric.data(), metrics.data(), metric.size(), tcclFloat32, l.comm, nullptr);
    if (!lab::ok(l, r, "all-gather(metric)")) {
      good = false;
    } else if (metrics[8 * (n - 1)] != float(10 * (l.nranks - 1))) {
      lab::say(l, "wrong result after all-gather(metric): %g", double(metrics[8 * (n - 1)]));
      good = false;
    }
  }
  if (good) lab::say(l, "training finished: 4 steps");
  return lab::finish(l, good);
}
