/*
 * labs/03-wrong-group/lab.cc: lab 3 -- a rank that joins the wrong group. See README.md for
 * the story; this is the program with the bug.
 *
 * What it is: a toy job that splits its world (4 or 5 ranks) into G = ceil(n / 2) groups with
 * tcclCommSplit(world, color = group, key = rank), in one of two layouts the seed picks:
 *   neighbours  rank r in group r / 2 (tensor-parallel pairs: {0,1} {2,3} {4}),
 *   strided     rank r in group r % G (data-parallel stripes: {0,3} {1,4} {2}).
 * Rank 0 prints the layout, as a job prints its parallelism plan. Each group then all-reduces
 * one number per rank, (world rank + 1), and checks the group's size and sum against the
 * layout. On one rank, chosen by the seed, the group comes out one off -- one more or one
 * less, chosen by the seed among those that name a group that exists -- so that rank joins
 * another group's communicator. Nothing hangs and no call fails: every communicator the split
 * makes is consistent, just not the one the layout meant. With LAB_FIX=1 every rank computes
 * its group right.
 *
 * Invariants: groupOf() and the seeded choices match lab.py (group_of(), instance()); the
 * layout line rank 0 prints is what lab.py's diagnose() reads; the split is collective over
 * the world, so every rank calls it, the bad one included; exit 0 only when this rank's group
 * has the layout's size and sum.
 *
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <string>
#include <vector>

namespace {

int groupCount(int nranks) { return (nranks + 1) / 2; }

/// The layout: which group a world rank belongs to.
int groupOf(int rank, int nranks, bool strided) {
  return strided ? rank % groupCount(nranks) : rank / 2;
}

/// The world ranks the layout puts in group g.
std::vector<int> membersOf(int g, int nranks, bool strided) {
  std::vector<int> m;
  for (int r = 0; r < nranks; r++) {
    if (groupOf(r, nranks, strided) == g) m.push_back(r);
  }
  return m;
}

}  // namespace

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  // The instance: the layout, which rank gets its group wrong, and which way (among the
  // directions that still name a group).
  const bool strided = lab::pick(l.seed, 2, 2) == 1;
  const int bad = lab::pick(l.seed, 0, l.nranks);
  std::vector<int> wrongGroups;
  for (int d : {-1, +1}) {
    const int g = groupOf(bad, l.nranks, strided) + d;
    if (g >= 0 && g < groupCount(l.nranks)) wrongGroups.push_back(g);
  }
  const int wrongGroup = wrongGroups[size_t(lab::pick(l.seed, 1, int(wrongGroups.size())))];
  if (l.rank == 0) {
    std::string plan;
    for (int g = 0; g < groupCount(l.nranks); g++) {
      plan += " {";
      for (int r : membersOf(g, l.nranks, strided)) {
        plan += (plan.back() == '{' ? "" : ",") + std::to_string(r);
      }
      plan += "}";
    }
    lab::say(l, "layout: %s, %d groups:%s", strided ? "strided" : "neighbours",
             groupCount(l.nranks), plan.c_str());
  }

  // The bug: this rank's group comes out one off.
  const int group = !l.fixed && l.rank == bad ? wrongGroup : groupOf(l.rank, l.nranks, strided);
  tcclComm_t sub = nullptr;
  bool good = lab::ok(l, tcclCommSplit(l.comm, group, l.rank, &sub, nullptr), "tcclCommSplit");
  if (good) {
    // The group's all-reduce: each rank adds (its world rank + 1), so a sum names its members.
    int size = 0;
    float x = float(l.rank + 1);
    good = lab::ok(l, tcclCommCount(sub, &size), "tcclCommCount") &&
           lab::ok(l, tcclAllReduce(&x, &x, 1, tcclFloat32, tcclSum, sub, nullptr),
                   "all-reduce on the group");
    // What the layout says this rank's group holds.
    const std::vector<int> members =
        membersOf(groupOf(l.rank, l.nranks, strided), l.nranks, strided);
    float want = 0;
    for (int r : members) want += float(r + 1);
    if (good && (size != int(members.size()) || x != want)) {
      lab::say(l, "my group has %d rank(s), expected %zu; its sum is %g, expected %g", size,
               members.size(), double(x), double(want));
      good = false;
    }
  }
  if (good) lab::say(l, "group all-reduce checked");
  // A failed rank aborts its communicators, as a job that stops does; a good one destroys
  // them. (Nothing waits on a peer here either way: the split's communicators are
  // consistent, so every collective completed.)
  for (tcclComm_t c : {sub, l.comm}) lab::end(c, good);
  return good ? 0 : 1;
}
