/*
 * labs/05-two-communicators/lab.cc: lab 5 -- two communicators, and one rank that uses them
 * in the other order. See README.md for the story; this is the program with the bug.
 *
 * What it is: a toy job with two communicators over the same ranks, made by splitting the
 * world twice (every rank color 0, key = its rank): "dp", for the gradients, and "tp", for
 * the activations (in a real job tp would be a few ranks of a node; here both span the world
 * so the lab stays small). Before the first step rank 0 broadcasts the weights on dp; then
 * every step all-reduces the gradients on dp, then the activations on tp. On one rank, chosen
 * by the seed, at one step after the first, also chosen by the seed, tp goes first -- as when
 * a rank takes another path through the code (here: its activations were ready early). Every
 * call blocks until its collective is done, so that rank waits in tp for ranks that wait in
 * dp for it: a deadlock that only the watchdog (TCCL_TIMEOUT) ends. With LAB_FIX=1 every rank
 * keeps the order.
 *
 * Why the dumps are written by hand: TCCL_FR_DUMP names a dump by the rank alone, so two
 * communicators of one process write the same file (the watchdog's dump of one overwrites the
 * other's). The program writes each communicator's flight recorder to a file of its own:
 * TCCL_FR_DUMP followed by "dp_" or "tp_" and the rank (tools/frtrace --prefix fr_dp_).
 *
 * Invariants: kSteps and the choice of the step match lab.py (STEPS, instance()); dp's first
 * collective is the broadcast, so step S is dp's collective S + 1 and tp's collective S;
 * every result is checked; both dumps are written whatever happened; exit 0 only when every
 * rank's results were right.
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr int kSteps = 5;

/// A communicator of the job: its handle and the name it was given.
struct Comm {
  const char* name;
  tcclComm_t comm = nullptr;
};

/// Splits the world into a copy of itself named `name` (every rank the same color).
bool split(const lab::Lab& l, Comm* c) {
  tcclConfig_t config = TCCL_CONFIG_INITIALIZER;
  config.commName = c->name;
  return lab::ok(l, tcclCommSplit(l.comm, 0, l.rank, &c->comm, &config), "tcclCommSplit");
}

/// An all-reduce of every rank's (rank + 1 + i % 8) on `c`, checked.
bool allReduce(const lab::Lab& l, const Comm& c, const char* what) {
  std::vector<float> x(1024);
  for (size_t i = 0; i < x.size(); i++) x[i] = float(l.rank + 1) + float(i % 8);
  const std::string call = std::string("all-reduce(") + what + ") on " + c.name;
  if (!lab::ok(l,
               tcclAllReduce(x.data(), x.data(), x.size(), tcclFloat32, tcclSum, c.comm, nullptr),
               call.c_str())) {
    return false;
  }
  for (size_t i = 0; i < x.size(); i++) {
    const float want = float(l.nranks * (l.nranks + 1) / 2) + float(l.nranks) * float(i % 8);
    if (x[i] != want) {
      lab::say(l, "wrong result after %s: element %zu is %g, expected %g", call.c_str(), i,
               double(x[i]), double(want));
      return false;
    }
  }
  return true;
}

/// Rank 0's weights on `c`, checked.
bool broadcast(const lab::Lab& l, const Comm& c) {
  std::vector<float> w(256, l.rank == 0 ? 0.25f : 0.0f);
  if (!lab::ok(l, tcclBroadcast(w.data(), w.data(), w.size(), tcclFloat32, 0, c.comm, nullptr),
               "broadcast(weights) on dp")) {
    return false;
  }
  if (w.back() != 0.25f) {
    lab::say(l, "wrong result after broadcast(weights) on dp: %g", double(w.back()));
    return false;
  }
  return true;
}

}  // namespace

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  // The instance: which rank changes the order, and at which step (counted from 1; never the
  // first, which sets up the connections -- see below).
  const int bad = lab::pick(l.seed, 0, l.nranks);
  const int badStep = 2 + lab::pick(l.seed, 1, kSteps - 1);

  // tccl, like NCCL, connects a communicator's ranks lazily, at the first collective that
  // needs each connection. A deadlock inside that setup waits on the bootstrap's bound
  // (TCCL_BOOTSTRAP_TIMEOUT) rather than on the watchdog, so the lab lets step 1 and a first
  // verdict-sized all-reduce on the world (below) make every connection before anything
  // goes wrong: what deadlocks is then the collectives themselves, as in a long-running job.
  int up = 1;
  bool good = lab::ok(l, tcclAllReduce(&up, &up, 1, tcclInt32, tcclSum, l.comm, nullptr),
                      "all-reduce(ranks up) on the world");
  Comm dp{"dp"}, tp{"tp"};
  good = good && split(l, &dp) && split(l, &tp) && broadcast(l, dp);
  for (int step = 1; step <= kSteps && good; step++) {
    if (!l.fixed && l.rank == bad && step == badStep) {
      // The bug: the activations were ready first, so this rank reduced them first.
      good = allReduce(l, tp, "activations") && allReduce(l, dp, "gradients");
    } else {
      good = allReduce(l, dp, "gradients") && allReduce(l, tp, "activations");
    }
  }
  if (good) lab::say(l, "training finished: %d steps", kSteps);
  // The job's verdict, agreed on the world communicator: every rank learns whether any rank
  // failed, and no rank leaves before all have stopped -- as an elastic agent stops a job
  // together. (It also keeps each rank's connections open until every rank's own watchdog
  // has had its say: a rank that left at once would end its peers' waits before their
  // watchdogs fire.)
  int failed = good ? 0 : 1;
  const bool agreed =
      lab::ok(l, tcclAllReduce(&failed, &failed, 1, tcclInt32, tcclSum, l.comm, nullptr),
              "all-reduce(verdict) on the world");
  if (agreed && failed > 0) lab::say(l, "the job failed on %d rank(s)", failed);
  good = good && agreed && failed == 0;
  // Each communicator's flight recorder to its own file (see above).
  const char* prefix = getenv("TCCL_FR_DUMP");
  for (const Comm* c : {&dp, &tp}) {
    if (prefix == nullptr || c->comm == nullptr) continue;
    const std::string path = std::string(prefix) + c->name + "_" + std::to_string(l.rank);
    tcclCommDumpFlightRecorder(c->comm, path.c_str());
  }
  // Failed communicators are aborted (their operations may still wait on peers), good ones
  // destroyed; the two split off the world go first.
  for (tcclComm_t c : {tp.comm, dp.comm, l.comm}) lab::end(c, good);
  return good ? 0 : 1;
}
