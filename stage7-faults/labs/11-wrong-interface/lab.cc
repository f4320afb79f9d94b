/*
 * labs/11-wrong-interface/lab.cc: lab 11 -- one node's environment names a network interface
 * that node does not have, and the job never starts. See README.md for the story; this is the
 * training script, and there is nothing wrong with it.
 *
 * What it is: a toy data-parallel job: it joins the world communicator (tcclCommInitFromEnv:
 * the bootstrap, over TCP, the way torchrun's ranks meet) and all-reduces its gradients (4096
 * floats) for 5 steps. The fault is in one rank's environment, chosen by the seed: its "node
 * profile" sets TCCL_SOCKET_IFNAME to an interface this host does not have (lab.py: rank_env
 * and WRAP). That rank cannot pick an address to listen on and fails at once; the others wait
 * in the bootstrap for it until TCCL_BOOTSTRAP_TIMEOUT (5 s here; 120 s by default) and fail
 * naming the rank that never joined. With LAB_FIX=1 no profile sets it.
 *
 * Invariants: nothing here depends on the seed (the bug is not in the program); exit 2 when
 * the communicator cannot be made, 1 when a collective fails, 0 when every result is right.
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <vector>

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;  // (it says why: the error of tcclCommInitFromEnv)
  lab::say(l, "joined: rank %d of %d", l.rank, l.nranks);
  std::vector<float> grads(4096);
  bool good = true;
  for (int step = 0; step < 5 && good; step++) {
    for (float& g : grads) g = float(l.rank + 1);
    const tcclResult_t r = tcclAllReduce(grads.data(), grads.data(), grads.size(), tcclFloat32,
                                         tcclSum, l.comm, nullptr);
    if (!lab::ok(l, r, "all-reduce(gradients)")) {
      good = false;
    } else if (grads[0] != float(l.nranks * (l.nranks + 1) / 2)) {
      lab::say(l, "wrong result after all-reduce(gradients): %g", double(grads[0]));
      good = false;
    }
  }
  if (good) lab::say(l, "training finished: 5 steps");
  return lab::finish(l, good);
}
