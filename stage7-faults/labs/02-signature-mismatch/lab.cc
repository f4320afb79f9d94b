/*
 * labs/02-signature-mismatch/lab.cc: lab 2 -- one rank calls one collective with one detail
 * wrong: the count, the element type, or the root. See README.md for the story; this is the
 * program with the bug.
 *
 * What it is: a toy training job's collectives, in a fixed order every rank shares (the
 * schedule below): a broadcast of the weights, two steps of (all-reduce the gradients, reduce
 * the loss to the logging rank 1, all-gather a metric), and a broadcast of the new learning
 * rate. On one rank, chosen by the seed, one collective, also chosen by the seed, is called
 * with one detail wrong, chosen by the seed among those the collective has:
 *   count  half the count (the size of a shard, not of the tensor),
 *   type   another element type: tcclInt32 for an all-reduce (the same width: the bytes add
 *          up as integers), tcclFloat16 for the others (half the bytes),
 *   root   itself as the root (the root: the next rank; broadcast and reduce only).
 * The order of the calls is the same on every rank, so the collectives still pair up by
 * number: what goes wrong depends on what the mismatch does to the bytes on the wire. With
 * LAB_FIX=1 every rank makes the same calls.
 *
 * Invariants: schedule() and fields() below and their namesakes in lab.py agree, and so do
 * the seeded choices (lab::pick, tools/lab's pick); every buffer holds the tensor's whole
 * size whatever the call says, so a wrong call corrupts data, never memory; every result is
 * checked in full on every rank that receives one; the flight recorder is written at the end
 * (TCCL_FR_DUMP, set by tools/lab); exit 0 only when every result is right.
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <vector>

namespace {

enum Kind { kBroadcast, kAllReduce, kReduce, kAllGather };
enum Field { kCount, kType, kRoot };

/// One collective of the schedule, as every rank should call it.
struct Call {
  Kind kind;
  const char* name;
  size_t count;  // elements (all-gather: per rank)
  int root;      // -1: the collective has none
};

std::vector<Call> schedule() {
  std::vector<Call> calls{{kBroadcast, "broadcast(weights)", 2048, 0}};
  for (int step = 0; step < 2; step++) {
    calls.push_back({kAllReduce, "all-reduce(gradients)", 4096, -1});
    calls.push_back({kReduce, "reduce(loss)", 256, 1});
    calls.push_back({kAllGather, "all-gather(metric)", 64, -1});
  }
  calls.push_back({kBroadcast, "broadcast(lr)", 16, 0});
  return calls;
}

/// The details a collective has, in the order the seed picks from (lab.py: fields()).
std::vector<Field> fields(Kind k) {
  if (k == kBroadcast || k == kReduce) return {kCount, kType, kRoot};
  return {kCount, kType};
}

/// What this rank contributes to element i (exact in float: small integers).
float input(const Call& c, int rank, size_t i) {
  switch (c.kind) {
    case kBroadcast:
      return rank == c.root ? float(i % 1000) + 0.5f : -1.0f;
    case kAllReduce:
    case kReduce:
      return float(rank + 1) + float(i % 16);
    case kAllGather:
      return float(100 * rank) + float(i);
  }
  return 0;
}

/// What element i of the result must be (all-gather: i runs over every rank's block).
float expected(const Call& c, int nranks, size_t i) {
  switch (c.kind) {
    case kBroadcast:
      return float(i % 1000) + 0.5f;
    case kAllReduce:
    case kReduce:
      return float(nranks * (nranks + 1) / 2) + float(nranks) * float(i % 16);
    case kAllGather:
      return float(100 * int(i / c.count)) + float(i % c.count);
  }
  return 0;
}

}  // namespace

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  const std::vector<Call> calls = schedule();
  // The instance: which rank, which collective, which detail.
  const int bad = lab::pick(l.seed, 0, l.nranks);
  const size_t at = size_t(lab::pick(l.seed, 1, int(calls.size())));
  const std::vector<Field> choices = fields(calls[at].kind);
  const Field field = choices[size_t(lab::pick(l.seed, 2, int(choices.size())))];

  bool good = true;
  for (size_t n = 0; n < calls.size() && good; n++) {
    const Call& c = calls[n];
    // Buffers of the tensor's whole size, whatever the call below says.
    const size_t total = c.kind == kAllGather ? c.count * size_t(l.nranks) : c.count;
    std::vector<float> send(c.count), recv(total, -7.0f);
    for (size_t i = 0; i < c.count; i++) send[i] = input(c, l.rank, i);
    // The call this rank makes: as the schedule says, except for the bug.
    size_t count = c.count;
    tcclDataType_t type = tcclFloat32;
    int root = c.root;
    if (!l.fixed && l.rank == bad && n == at) {
      if (field == kCount) count = c.count / 2;
      if (field == kType) type = c.kind == kAllReduce ? tcclInt32 : tcclFloat16;
      // It takes itself for the root (the root itself takes the next rank): a rank that keeps
      // its role in the ring under the other root would make no difference at all.
      if (field == kRoot) root = l.rank != c.root ? l.rank : (c.root + 1) % l.nranks;
    }
    tcclResult_t r = tcclSuccess;
    switch (c.kind) {
      case kBroadcast:
        if (l.rank == c.root) recv = send;  // the root's own copy is the reference data
        r = tcclBroadcast(recv.data(), recv.data(), count, type, root, l.comm, nullptr);
        break;
      case kAllReduce:
        r = tcclAllReduce(send.data(), recv.data(), count, type, tcclSum, l.comm, nullptr);
        break;
      case kReduce:
        r = tcclReduce(send.data(), recv.data(), count, type, tcclSum, root, l.comm, nullptr);
        break;
      case kAllGather:
        r = tcclAllGather(send.data(), recv.data(), count, type, l.comm, nullptr);
        break;
    }
    if (!lab::ok(l, r, c.name)) {
      good = false;
      break;
    }
    // Every rank that receives a result checks all of it (a reduce's result is the root's).
    if (c.kind == kReduce && l.rank != c.root) continue;
    for (size_t i = 0; i < total; i++) {
      if (recv[i] != expected(c, l.nranks, i)) {
        lab::say(l, "wrong result after %s: element %zu is %g, expected %g", c.name, i,
                 double(recv[i]), double(expected(c, l.nranks, i)));
        good = false;
        break;
      }
    }
  }
  if (good) lab::say(l, "training finished: %zu collectives", calls.size());
  return lab::finish(l, good);
}
