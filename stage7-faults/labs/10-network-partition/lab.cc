/*
 * labs/10-network-partition/lab.cc: lab 10 -- the network between two nodes fails in the
 * middle of training. See README.md for the story; this is the program, and the fault.
 *
 * What it is: the training loop of a toy data-parallel job on two "nodes" of two ranks each
 * (netns-wrap.sh puts every rank in its node's network namespace; a veth pair is the only
 * link between the nodes, and SHM and P2P are off, so every byte goes over NET/Socket).
 * Every step all-reduces the gradients (4096 floats) and all-gathers a metric (8 floats per
 * rank). Before one operation, chosen by the seed, one rank, also chosen by the seed, takes
 * its node's end of the link down -- `ip link set dev <veth> down`, what a failed switch port
 * or a pulled cable does -- and says nothing: the job only sees that the bytes stop. With
 * LAB_FIX=1 the link stays up.
 *
 * Invariants: op numbers count from 1 in issue order, as the flight recorder's
 * collective_seq_id does, and match lab.py's instance(); every rank leaves its flight recorder
 * at TCCL_FR_DUMP<rank> (set by tools/lab): the watchdog's dump when it fired, else one
 * written at the end; exit 0 only when every result is right; 3 when the lab itself could
 * not be set up (not root, no namespaces).
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr int kSteps = 6;                 // two operations per step: ops 1 .. 2 * kSteps
constexpr useconds_t kComputeUs = 50000;  // "compute" before each operation: 50 ms

/// Takes this node's end of the veth down: both ends lose carrier, and every TCP connection
/// between the nodes stops moving -- without an error, as on a real network. Connections
/// inside a node keep working (their addresses are local).
bool linkDown(const lab::Lab& l, const char* netif) {
  const std::string cmd = std::string("ip link set dev ") + netif + " down";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    lab::say(l, "lab setup: `%s` failed (status %d): lab 10 needs root", cmd.c_str(), rc);
    return false;
  }
  return true;
}

/// Whether this rank's flight recorder is already at TCCL_FR_DUMP<rank> (the watchdog's).
bool watchdogDumped(const lab::Lab& l) {
  const char* prefix = getenv("TCCL_FR_DUMP");
  return prefix != nullptr && access((prefix + std::to_string(l.rank)).c_str(), F_OK) == 0;
}

}  // namespace

int main() {
  const char* netif = getenv("LAB_NETIF");  // set by netns-wrap.sh: this node's veth end
  if (netif == nullptr) {
    fprintf(stderr,
            "lab 10 runs each rank in a network namespace: start it with "
            "tools/lab run 10 (its WRAP, netns-wrap.sh, sets LAB_NETIF)\n");
    return 3;
  }
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  // The instance (lab.py's instance() makes the same choices): who pulls the cable, and
  // before which operation. pick 0 (which rank shares rank 0's node) is lab.py's rank_env.
  const int cutter = lab::pick(l.seed, 1, l.nranks);
  const int cutAt = 3 + lab::pick(l.seed, 2, 2 * kSteps - 2);

  std::vector<float> grads(4096), metric(8), metrics(8 * size_t(l.nranks));
  bool good = true;
  int op = 0;
  for (int step = 1; step <= kSteps && good; step++) {
    for (int half = 0; half < 2 && good; half++) {
      op++;
      // The forward and backward passes before each collective. Every rank computes as long,
      // so no rank looks late; and the cutter's link goes down at the end of its compute,
      // long after the previous operation's last bytes landed (a veth delivers in
      // microseconds): the partition falls between op - 1, which every rank completed, and
      // op -- the same answer on every run.
      usleep(kComputeUs);
      if (!l.fixed && l.rank == cutter && op == cutAt && !linkDown(l, netif)) return 3;
      tcclResult_t r;
      if (half == 0) {
        for (float& g : grads) g = float(l.rank + 1);
        r = tcclAllReduce(grads.data(), grads.data(), grads.size(), tcclFloat32, tcclSum, l.comm,
                          nullptr);
        if (!lab::ok(l, r, "all-reduce(gradients)")) {
          good = false;
        } else if (grads[0] != float(l.nranks * (l.nranks + 1) / 2)) {
          lab::say(l, "wrong result after all-reduce(gradients): %g", double(grads[0]));
          good = false;
        }
      } else {
        for (float& m : metric) m = float(10 * l.rank);
        r = tcclAllGather(metric.data(), metrics.data(), metric.size(), tcclFloat32, l.comm,
                          nullptr);
        if (!lab::ok(l, r, "all-gather(metric)")) {
          good = false;
        } else if (metrics[8 * size_t(l.nranks - 1)] != float(10 * (l.nranks - 1))) {
          lab::say(l, "wrong result after all-gather(metric): %g",
                   double(metrics[8 * size_t(l.nranks - 1)]));
          good = false;
        }
      }
    }
    if (good && l.rank == 0) lab::say(l, "step %d: loss %.3f", step, 2.0 / (step + 1));
  }
  if (good) lab::say(l, "training finished: %d collectives", op);
  // The flight recorder, for tools/frtrace -- unless the watchdog already wrote it when it
  // fired: that dump shows the stuck operation in flight, while one written now, after the
  // abort, would show it "completed" (its error only in tccl.result, which frtrace does not
  // read). A rank that failed another way (a peer on its own node aborted and closed their
  // connection) has no dump yet, and writes it here.
  if (good || !watchdogDumped(l)) tcclCommDumpFlightRecorder(l.comm, nullptr);
  return lab::finish(l, good, /*dump=*/false);
}
