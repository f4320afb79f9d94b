/*
 * labs/08-rank-crash/lab.cc: lab 8 -- a rank dies in the middle of the job. See README.md
 * for the story; this is the training script that meets it.
 *
 * What it is: the training loop of a toy data-parallel job: 5 steps, each all-reducing the
 * gradients (4096 floats) and all-gathering a metric (8 floats per rank) -- 10 collectives.
 * The crash is not in this file: tools/lab starts one rank, chosen by the seed, with
 * TCCL_FAULT=kill at an operation chosen by the seed (lab.py: rank_env), and the library
 * SIGKILLs that process as it calls the operation -- what the OOM killer or a segfault in a
 * data loader does to a real rank. The survivors' call fails at once (tcclRemoteError: the
 * SHM transport watches its peers' processes), and this script, as written, gives up: it
 * writes its flight recorder and exits 1, like most training scripts.
 * With LAB_FIX=1 the crash still happens, and the survivors recover: they exclude the dead
 * rank with tcclCommShrink(..., TCCL_SHRINK_ABORT), redo the failed step on the smaller
 * communicator and finish the job (exit 0; the dead rank stays dead).
 *
 * Invariants: the schedule below and ops() in lab.py are the same list; every survivor leaves
 * the failed communicator's flight recorder in TCCL_FR_DUMP<rank> (set by tools/lab) -- with
 * the fix, written before the shrink, and the survivors' communicator's at the end under
 * another name (both files are named by the rank in their communicator, and would overwrite
 * each other); exit 0 only when every result is right for the ranks that took part.
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

enum Op { kAllReduce, kAllGather };
const char* kNames[] = {"all-reduce(gradients)", "all-gather(metric)"};

std::vector<Op> schedule() {
  std::vector<Op> ops;
  for (int step = 0; step < 5; step++) {
    ops.push_back(kAllReduce);
    ops.push_back(kAllGather);
  }
  return ops;
}

/// One collective of the schedule over `comm`, whose members are the world ranks `members`
/// (in order); `me` is this process's world rank. Checks the result against what those
/// members contribute: world rank w gives w + 1 to the gradients and 10 * w as its metric.
tcclResult_t runOp(const lab::Lab& l, Op op, tcclComm_t comm, const std::vector<int>& members,
                   int me, bool* right) {
  const size_t n = members.size();
  *right = true;
  if (op == kAllReduce) {
    std::vector<float> grads(4096, float(me + 1));
    const tcclResult_t r = tcclAllReduce(grads.data(), grads.data(), grads.size(), tcclFloat32,
                                         tcclSum, comm, nullptr);
    float want = 0;
    for (int w : members) want += float(w + 1);
    if (r == tcclSuccess && grads[grads.size() - 1] != want) {
      lab::say(l, "wrong result after %s: %g (expected %g)", kNames[op], double(grads.back()),
               double(want));
      *right = false;
    }
    return r;
  }
  std::vector<float> metric(8, float(10 * me)), metrics(8 * n);
  const tcclResult_t r =
      tcclAllGather(metric.data(), metrics.data(), metric.size(), tcclFloat32, comm, nullptr);
  for (size_t i = 0; r == tcclSuccess && i < n; i++) {
    if (metrics[8 * i] != float(10 * members[i])) {
      lab::say(l, "wrong result after %s: slot %zu holds %g", kNames[op], i,
               double(metrics[8 * i]));
      *right = false;
      break;
    }
  }
  return r;
}

/// The rank that died, as the failed communicator names it ("rank R (pid P) has exited"), or
/// -1. Every survivor must exclude the same ranks from the shrink; here each learns it from
/// its own SHM transport, which watches every peer's process. (A real job asks its launcher --
/// torchrun's agent knows which worker exited -- or a store heartbeat.)
int deadRank(tcclComm_t comm) {
  const std::string why = tcclGetLastError(comm);
  const size_t at = why.find(" has exited");
  const size_t from = why.rfind("rank ", at);
  if (at == std::string::npos || from == std::string::npos) return -1;
  return atoi(why.c_str() + from + 5);
}

}  // namespace

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  const std::vector<Op> ops = schedule();
  std::vector<int> members;  // world ranks of the current communicator, in its rank order
  for (int r = 0; r < l.nranks; r++) members.push_back(r);
  const int me = l.rank;
  tcclComm_t comm = l.comm;  // the world; after a shrink, the survivors' communicator
  bool shrunk = false;
  bool good = true;
  for (size_t i = 0; i < ops.size() && good; i++) {
    bool right = true;
    tcclResult_t r = runOp(l, ops[i], comm, members, me, &right);
    if (r != tcclSuccess) {
      lab::ok(l, r, kNames[ops[i]]);
      if (!l.fixed) {
        good = false;  // as written: give up (the dump below keeps the evidence)
        break;
      }
      // The evidence first: the failed communicator's last operations, before the shrink
      // aborts it.
      tcclCommDumpFlightRecorder(comm, nullptr);
      const int dead = deadRank(comm);
      if (dead < 0) {
        lab::say(l, "cannot tell which rank is gone: giving up");
        good = false;
        break;
      }
      // The fix: go on without the dead rank. ABORT stops what still waits for it; only the
      // survivors call this, and nothing is sent to the dead one.
      int exclude = dead;
      tcclComm_t rest = nullptr;
      if (!lab::ok(l, tcclCommShrink(comm, &exclude, 1, &rest, nullptr, TCCL_SHRINK_ABORT),
                   "tcclCommShrink")) {
        good = false;
        break;
      }
      tcclCommAbort(comm);  // revoked by the shrink: free it without waiting for anything
      comm = rest;
      shrunk = true;
      members.erase(members.begin() + dead);
      int newRank = -1;
      tcclCommUserRank(comm, &newRank);
      lab::say(l, "lost rank %d: going on with %zu ranks (I am rank %d now); redoing %s", dead,
               members.size(), newRank, kNames[ops[i]]);
      r = runOp(l, ops[i], comm, members, me, &right);
      if (!lab::ok(l, r, kNames[ops[i]])) good = false;
    }
    if (!right) good = false;
  }
  if (good)
    lab::say(l, "training finished: %zu collectives, %zu ranks", ops.size(), members.size());
  if (!shrunk) {
    tcclCommDumpFlightRecorder(comm, nullptr);
  } else {
    // The survivors' communicator numbers its ranks afresh: its dump gets a name of its own.
    int newRank = 0;
    tcclCommUserRank(comm, &newRank);
    const char* prefix = getenv("TCCL_FR_DUMP");
    const std::string path =
        std::string(prefix ? prefix : "fr_") + "shrunk_" + std::to_string(newRank);
    tcclCommDumpFlightRecorder(comm, path.c_str());
  }
  lab::end(comm, good);
  return good ? 0 : 1;
}
