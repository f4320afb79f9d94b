/*
 * labs/04-send-deadlock/lab.cc: lab 4 -- partners swap data with tcclSend then tcclRecv,
 * outside a group. See README.md for the story; this is the program with the bug.
 *
 * What it is: the exchange loop of a toy model-parallel job. Ranks pair up (rank ^ 1) and,
 * for each stage of a sequence-length warm-up, swap an activation shard that grows 1.5x per
 * stage. Each rank first sends its shard, then receives its partner's -- two blocking calls,
 * not in a group. A host-buffer send returns once its bytes are in the connection's FIFO
 * (TCCL_BUFFSIZE, 4 MiB by default): while a shard fits, both sends return and both
 * receives drain the FIFOs; the first shard larger than the FIFO leaves both partners inside
 * tcclSend, each waiting for the other to receive -- until the watchdog (TCCL_TIMEOUT) ends
 * it. The seed picks the stage where the shard first outgrows the FIFO, and the sizes. With
 * LAB_FIX=1 each swap is one group (tcclGroupStart, send, receive, tcclGroupEnd), which
 * runs the send and the receive together: no size deadlocks.
 *
 * Invariants: the schedule below and shards() in lab.py are the same list (the same integer
 * arithmetic); a handshake, always grouped, comes first: it connects both directions of each
 * pair (tccl connects lazily, at a connector's first use, and the two ends must meet), so the
 * swaps that follow fail only for their size; the program writes its flight recorder at the
 * end (TCCL_FR_DUMP, set by tools/lab); exit 0 only when every swap moved the right data.
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <cstring>
#include <vector>

namespace {

constexpr size_t kFifoBytes = 4194304;  // TCCL_BUFFSIZE's default (docs/knobs.md)
constexpr int kStages = 7;

/// The shard of each stage, in floats. Stage `first` (1-based) is the first larger than the
/// FIFO: 101..149% of it; the stages before are 2/3 of the next (so at most 99% of the FIFO),
/// the ones after 3/2 of the previous.
std::vector<size_t> shards(int first, int percent) {
  std::vector<size_t> n(kStages + 1);
  n[size_t(first)] = kFifoBytes / sizeof(float) * size_t(percent) / 100;
  for (int s = first - 1; s >= 1; s--) n[size_t(s)] = n[size_t(s) + 1] * 2 / 3;
  for (int s = first + 1; s <= kStages; s++) n[size_t(s)] = n[size_t(s) - 1] * 3 / 2;
  return n;
}

}  // namespace

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  const int first = 2 + lab::pick(l.seed, 1, kStages - 1);  // 2..7
  const int percent = 101 + lab::pick(l.seed, 2, 49);       // 101..149
  const std::vector<size_t> n = shards(first, percent);
  const int partner = l.rank ^ 1;

  // The handshake: both partners agree on the schedule. (tcclSendRecv is one group.)
  int mine[2] = {kStages, int(n[kStages])}, theirs[2] = {0, 0};
  bool good = lab::ok(
      l, tcclSendRecv(mine, theirs, 2, tcclInt32, partner, partner, l.comm, nullptr), "handshake");
  if (good && (theirs[0] != mine[0] || theirs[1] != mine[1])) {
    lab::say(l, "handshake: partner %d has another schedule", partner);
    good = false;
  }

  std::vector<float> out, in;
  for (int s = 1; s <= kStages && good; s++) {
    const size_t count = n[size_t(s)];
    out.assign(count, float(l.rank + 1));
    in.assign(count, 0.0f);
    lab::say(l, "stage %d: swapping %zu bytes with rank %d", s, count * sizeof(float), partner);
    if (l.fixed) {
      // The fix: one group, so the send and the receive progress together.
      tcclGroupStart();
      tcclSend(out.data(), count, tcclFloat32, partner, l.comm, nullptr);
      tcclRecv(in.data(), count, tcclFloat32, partner, l.comm, nullptr);
      good = lab::ok(l, tcclGroupEnd(), "swap");
    } else {
      // The bug: the send must finish before the receive is even posted.
      good =
          lab::ok(l, tcclSend(out.data(), count, tcclFloat32, partner, l.comm, nullptr),
                  "tcclSend") &&
          lab::ok(l, tcclRecv(in.data(), count, tcclFloat32, partner, l.comm, nullptr), "tcclRecv");
    }
    if (good && (in.front() != float(partner + 1) || in.back() != float(partner + 1))) {
      lab::say(l, "stage %d: wrong data from rank %d: %g", s, partner, double(in.front()));
      good = false;
    }
  }
  if (good) lab::say(l, "warm-up finished: %d stages", kStages);
  return lab::finish(l, good);
}
