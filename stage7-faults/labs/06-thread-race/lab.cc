/*
 * labs/06-thread-race/lab.cc: lab 6 -- two threads of one rank call collectives on the same
 * communicator at once. See README.md for the story; this is the program with the bug.
 *
 * What it is: the training loop of a toy data-parallel job. Every step all-reduces the
 * gradients (4096 floats), then the loss (1 float), both on the main thread. A recent
 * "overlap" change: a rank that finished its backward pass ahead of the others hands the
 * loss all-reduce to a metrics thread, so that it runs while the gradient all-reduce waits
 * for the slower ranks. The seed picks the rank that is ahead, and the step. Its metrics
 * thread calls tcclAllReduce while the main thread is inside the gradients' tcclAllReduce on
 * the same communicator: tccl refuses the second call (tcclInvalidUsage, "already running a
 * call of another thread"). The metrics thread prints its error and ends, as a Python
 * thread's exception does, and nobody looks at it: that rank goes on to the next step's
 * gradient all-reduce while the others are in this step's loss all-reduce -- a mismatch the
 * others meet as an error (or, where it fits the connections, a hang). With LAB_FIX=1 the
 * loss is all-reduced on the main thread, after the gradients, on every rank and every
 * step.
 *
 * Invariants: the race is deterministic -- at the chosen step the other ranks start their
 * gradient all-reduce kLateMs after the rank that is ahead, and its metrics thread calls
 * kMetricsMs after the main thread entered, so the main thread is always inside its call
 * (waiting for the peers) when the second call comes; instance() in lab.py makes the same
 * seeded choices; the program writes its flight recorder at the end (TCCL_FR_DUMP, set by
 * tools/lab); exit 0 only when every result is right.
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <chrono>
#include <thread>
#include <vector>

namespace {

constexpr int kSteps = 6;
constexpr int kLateMs = 400;     // how far behind the other ranks are at the racing step
constexpr int kMetricsMs = 100;  // when the metrics thread calls, after the main thread did

void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  const int ahead = lab::pick(l.seed, 0, l.nranks);  // the rank that runs ahead ...
  const int step = 2 + lab::pick(l.seed, 1, 4);      // ... at this step (2..5, from 1)
  const float total = float(l.nranks * (l.nranks + 1) / 2);

  std::vector<float> grads(4096);
  float loss = 0.0f;
  bool good = true;
  for (int s = 1; s <= kSteps && good; s++) {
    // The backward pass. At the racing step the other ranks are slower (a straggler's data
    // loader, say): the rank that is ahead reaches the gradient all-reduce first.
    if (s == step && l.rank != ahead) sleepMs(kLateMs);
    for (float& g : grads) g = float(l.rank + 1);
    loss = float(l.rank + 1);

    const bool overlap = !l.fixed && s == step && l.rank == ahead;
    std::thread metrics;
    if (overlap) {
      // The bug: the loss goes to the metrics thread while the main thread all-reduces the
      // gradients -- two threads, one communicator.
      metrics = std::thread([&] {
        sleepMs(kMetricsMs);
        lab::ok(l, tcclAllReduce(&loss, &loss, 1, tcclFloat32, tcclSum, l.comm, nullptr),
                "metrics thread: tcclAllReduce(loss)");
      });
    }
    good = lab::ok(l,
                   tcclAllReduce(grads.data(), grads.data(), grads.size(), tcclFloat32, tcclSum,
                                 l.comm, nullptr),
                   "tcclAllReduce(gradients)");
    if (overlap) {
      // The metrics thread's error is printed and forgotten, as a Python thread's exception
      // is: the main thread only waits for it to end, and goes on to the next step.
      metrics.join();
    } else if (good) {
      good = lab::ok(l, tcclAllReduce(&loss, &loss, 1, tcclFloat32, tcclSum, l.comm, nullptr),
                     "tcclAllReduce(loss)");
    }
    // (Only the gradients are checked: the loss is only logged.)
    if (good && (grads[0] != total || grads.back() != total)) {
      lab::say(l, "step %d: wrong gradients: %g (expected %g)", s, double(grads[0]), double(total));
      good = false;
    }
    if (good) lab::say(l, "step %d: loss %g", s, double(loss) / l.nranks);
  }
  if (good) lab::say(l, "training finished: %d steps", kSteps);
  return lab::finish(l, good);
}
