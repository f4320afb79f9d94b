/*
 * labs/07-buffer-reuse/lab.cc: lab 7 -- a buffer cleared before the all-reduce that uses it
 * completed. See README.md for the story; this is the program with the bug.
 *
 * What it is: the training loop of a toy data-parallel job on a non-blocking communicator
 * (config.blocking = 0, split from the world): tcclAllReduce returns tcclInProgress at once
 * and runs in a job thread; the program polls tcclCommGetAsyncError until it stops saying
 * tcclInProgress, and only then may it touch the buffer again. Each rank's gradient is
 * 1 << rank in every element, so a correct sum has every rank's bit set and a wrong one
 * shows whose contribution went missing. On one rank, chosen by the seed, at one step, also
 * chosen, the data loader's rewind path clears the gradient buffer for the next step between
 * the all-reduce's launch and its completion check: the job reads zeros where it had not yet
 * read the gradient, and every rank receives sums without that rank's bit. With LAB_FIX=1 the
 * buffer is cleared after the completion check.
 *
 * Invariants: the race is deterministic -- at the chosen step the other ranks call the
 * all-reduce kLateMs after the rank that clears, so its job is still waiting for them (having
 * read at most a FIFO's worth of the buffer, TCCL_BUFFSIZE, 4 MiB by default, smaller than
 * the buffer) when the buffer is cleared; instance() in lab.py makes the same seeded choices;
 * the program writes the flight recorder at the end (it shows nothing wrong: every operation
 * completed); exit 0 only when every sum is right.
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <chrono>
#include <thread>
#include <vector>

namespace {

constexpr int kSteps = 6;
constexpr size_t kCount = 2u << 20;  // floats: 8 MiB, twice the default FIFO
constexpr int kLateMs = 150;         // how far behind the other ranks are at the rewind step

/// Polls until the communicator's job ends; its result.
tcclResult_t waitJob(tcclComm_t comm) {
  tcclResult_t state = tcclInProgress;
  while (state == tcclInProgress) {
    const tcclResult_t r = tcclCommGetAsyncError(comm, &state);
    if (r != tcclSuccess) return r;
    if (state == tcclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return state;
}

}  // namespace

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  const int rewinds = lab::pick(l.seed, 0, l.nranks);  // the rank whose data shard rewinds ...
  const int step = 2 + lab::pick(l.seed, 1, 4);        // ... at this step (2..5, from 1)

  // The non-blocking communicator: a split of the world with config.blocking = 0.
  tcclComm_t nb = nullptr;
  tcclConfig_t config = TCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "grads";
  tcclResult_t r = tcclCommSplit(l.comm, 0, l.rank, &nb, &config);
  if (r == tcclInProgress) r = waitJob(nb);
  if (!lab::ok(l, r, "tcclCommSplit")) {
    tcclCommAbort(l.comm);
    return 1;
  }

  const float mine = float(1 << l.rank);
  const float expected = float((1 << l.nranks) - 1);  // every rank's bit
  std::vector<float> grads(kCount, mine);
  bool good = true, sums = true;
  for (int s = 1; s <= kSteps && good; s++) {
    // At the rewind step the other ranks are slower (their loaders read the next file).
    if (s == step && l.rank != rewinds) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kLateMs));
    }
    r = tcclAllReduce(grads.data(), grads.data(), kCount, tcclFloat32, tcclSum, nb, nullptr);
    if (r != tcclInProgress && !lab::ok(l, r, "tcclAllReduce")) {
      good = false;
      break;
    }
    const bool rewind = s == step && l.rank == rewinds;
    if (rewind && !l.fixed) {
      // The bug: the shard ran out, and the rewind path resets the buffer for the next step
      // -- while the all-reduce is still reading it.
      for (float& g : grads) g = 0.0f;
    }
    good = lab::ok(l, waitJob(nb), "tcclAllReduce (completion)");
    // The optimizer step: it reads the sums.
    size_t bad = kCount;
    for (size_t i = 0; i < kCount && good; i++) {
      if (grads[i] != expected) {
        bad = i;
        break;
      }
    }
    if (good && bad < kCount) {
      lab::say(l, "step %d: wrong gradient sum: element %zu is %g (expected %g)", s, bad,
               double(grads[bad]), double(expected));
      sums = false;
    } else if (good) {
      lab::say(l, "step %d: gradient sum ok", s);
    }
    if (rewind && l.fixed) {
      // The fix: the same reset, once the all-reduce is over and its sums are used.
      for (float& g : grads) g = 0.0f;
    }
    for (float& g : grads) g = mine;  // the next step's gradient
  }
  if (good && sums) lab::say(l, "training finished: %d steps", kSteps);
  tcclCommDumpFlightRecorder(nb, nullptr);
  lab::end(nb, good);
  lab::end(l.comm, good);
  return good && sums ? 0 : 1;
}
