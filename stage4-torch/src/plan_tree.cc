/*
 * plan_tree.cc: planning a group's tree and recursive-doubling collectives.
 *
 * What it is: the phase after the rings (plan_ring.cc). The collectives the tuner gave to the
 * tree or to recursive doubling are grouped by the shape they run on, in order of first
 * appearance:
 *   - AllReduce on the tree: the double binary tree, both halves;
 *   - Broadcast / Reduce on the tree: the tree rooted at their root (one shape per root);
 *   - AllReduce by recursive doubling: the exchange pattern.
 * Each shape becomes the items of this rank's part in it, and every item gets its connections
 * in the batch's conns table (device/tree.h and device/rec_doubling.h say in which slots):
 *   tree, root of it        one kTreeRoot item  (children in, children out)
 *   tree, any other rank    a kTreeUp item      (children in, parent out)   AllReduce, Reduce
 *                           a kTreeDown item    (parent in, children out)   AllReduce, Broadcast
 *   small AllReduce         one tree only; every rank runs one kTreeUpDown item (both halves)
 *   recursive doubling      one kRecDoubling item (folding partner, then one partner per step)
 *
 * Small all-reduces (at most kTreeUpDownMaxBytes) form shapes of their own: below that size
 * a call's time is its fixed costs, and one tree with one item per rank (NCCL's runTreeUpDown)
 * has four times fewer items to run than the double tree split in up and down halves.
 *
 * Connectors: shape s, tree t uses channel 2s + t. Two shapes of one phase never share a
 * connector (the batch invariant, work.h), and the two trees of the double tree never do (with
 * two ranks, tree 0's down edge is tree 1's up edge). Rings and p2p run in other phases, so
 * their channels may be the same numbers: each connector carries its messages in the order the
 * phases run, which is the same on both ends. More than kMaxShapes shapes start a new phase.
 *
 * Invariants: every rank makes the same shapes and phases in the same order from matching calls
 * (the tuner's choice, the roots and the order of calls are the same everywhere); the shape of a
 * tree depends only on (nranks, root).
 *
 * NCCL counterpart: src/enqueue.cc (the tree case of the work planning), src/graph/connect.cc
 * (connectTrees, called from ncclTopoPostset: which peers a channel's tree connects).
 * Added in: stage 3.
 */
#include <map>
#include <tuple>
#include <vector>

#include "comm_context.h"
#include "device/rec_doubling.h"
#include "device/tree.h"
#include "plan.h"
#include "trees.h"

namespace tccl {

namespace {

constexpr int kMaxShapes = 8;  // per phase: channels 0..15

/// All-reduces up to this size run on one tree, one up-down item per rank: a small call's
/// time is its fixed costs, which one item per rank keeps low; above it the double tree's
/// halved data and overlapped halves are as fast or faster (chapter 3, "Tree AllReduce: up,
/// turn around, down", measures both sides).
constexpr size_t kTreeUpDownMaxBytes = 64 << 10;

/// What a shape is: (algo, func, root). AllReduce has no root: kNoRoot, or kSingleTree for a
/// small all-reduce on the tree.
using ShapeKey = std::tuple<Algo, int, int>;
constexpr int kNoRoot = -1, kSingleTree = -2;

struct Shape {
  ShapeKey key;
  std::vector<WorkElem> elems;
};

/// Where a shape's elems are in the batch: stored once, run by every item of the shape.
struct ElemRange {
  int start, count;
};

tcclResult_t appendElems(Phase& phase, const std::vector<WorkElem>& elems, ElemRange* out) {
  WorkBatch& b = phase.batch;
  if (b.nElems + int(elems.size()) > kMaxWorkElems) {
    TCCL_WARN("group too large: at most %d operations per communicator in one group",
              kMaxWorkElems);
    return tcclInvalidUsage;
  }
  *out = ElemRange{b.nElems, int(elems.size())};
  for (const WorkElem& e : elems) b.elems[b.nElems++] = e;
  return tcclSuccess;
}

/// The items of one rank in one tree (t: which tree, channel: its connectors; upDown: one item
/// for both halves).
tcclResult_t addTreeItems(ConnectorTable& connectors, Phase& phase, WorkFunc func,
                          const TreeNode& node, int t, int channel, ElemRange elems,
                          bool upDown = false) {
  auto conn = [&](int peer, bool isSend) {
    return peer < 0 ? nullptr : connectors.get(peer, channel, isSend);
  };
  const bool up = func != WorkFunc::kBroadcast;    // AllReduce and Reduce go up
  const bool down = func != WorkFunc::kReduce;     // AllReduce and Broadcast come down
  std::vector<Connector*> slots(kTreeSlots, nullptr);
  if (upDown) {  // every connection of the node, in one item; the root's parent slots stay null
    slots[idx(TreeSlot::kRecvParent)] = conn(node.parent, false);
    slots[idx(TreeSlot::kSendParent)] = conn(node.parent, true);
    for (int i = 0; i < 2; i++) {
      slots[idx(treeRecvChild(i))] = conn(node.child[i], false);
      slots[idx(treeSendChild(i))] = conn(node.child[i], true);
    }
    const int peer = !node.isRoot()       ? node.parent
                     : node.child[0] >= 0 ? node.child[0]
                                          : node.child[1];
    return addTableItem(phase, WorkKind::kTreeUpDown, peer, t, slots, elems.start, elems.count);
  }
  if (node.isRoot()) {
    for (int i = 0; i < 2; i++) {
      if (up) slots[idx(treeRecvChild(i))] = conn(node.child[i], false);
      if (down) slots[idx(treeSendChild(i))] = conn(node.child[i], true);
    }
    return addTableItem(phase, WorkKind::kTreeRoot, node.child[0] >= 0 ? node.child[0] : node.child[1],
                        t, slots, elems.start, elems.count);
  }
  if (up) {
    for (int i = 0; i < 2; i++) slots[idx(treeRecvChild(i))] = conn(node.child[i], false);
    slots[idx(TreeSlot::kSendParent)] = conn(node.parent, true);
    TCCL_CHECK(addTableItem(phase, WorkKind::kTreeUp, node.parent, t, slots, elems.start, elems.count));
    slots.assign(kTreeSlots, nullptr);
  }
  if (down) {
    slots[idx(TreeSlot::kRecvParent)] = conn(node.parent, false);
    for (int i = 0; i < 2; i++) slots[idx(treeSendChild(i))] = conn(node.child[i], true);
    TCCL_CHECK(addTableItem(phase, WorkKind::kTreeDown, node.parent, t, slots, elems.start, elems.count));
  }
  return tcclSuccess;
}

/// The recursive-doubling item: folding partner, then the partner of each step.
tcclResult_t addRecDoublingItem(const CommContext* comm, ConnectorTable& connectors,
                                Phase& phase, int channel, ElemRange elems) {
  const int r = comm->rank, n = comm->nranks, p = rdPow2(n), extra = n - p;
  std::vector<Connector*> slots(2, nullptr);
  if (r < 2 * extra) {
    const int fold = r % 2 == 0 ? r + 1 : r - 1;
    slots[0] = connectors.get(fold, channel, true);
    slots[1] = connectors.get(fold, channel, false);
  }
  int firstPeer = -1;
  if (!(r < 2 * extra && r % 2 == 0)) {  // folded ranks only talk to their partner
    const int v = r < 2 * extra ? r / 2 : r - extra;  // our place among the p
    for (int bit = 1; bit < p; bit <<= 1) {
      const int w = v ^ bit;
      const int peer = w < extra ? 2 * w + 1 : w + extra;
      if (firstPeer < 0) firstPeer = peer;
      slots.push_back(connectors.get(peer, channel, true));
      slots.push_back(connectors.get(peer, channel, false));
    }
  }
  return addTableItem(phase, WorkKind::kRecDoubling, firstPeer >= 0 ? firstPeer : r ^ 1, 0,
                      slots, elems.start, elems.count);
}

}  // namespace

tcclResult_t addTableItem(Phase& phase, WorkKind kind, int peer, int channel,
                          const std::vector<Connector*>& conns, int elemStart, int elemCount) {
  if (phase.nConns + int(conns.size()) > kMaxWorkConns) {
    TCCL_WARN("group too large: at most %d tree/recursive-doubling connections per batch",
              kMaxWorkConns);
    return tcclInvalidUsage;
  }
  TCCL_CHECK(addItem(phase, kind, peer, channel, nullptr, nullptr, {}));
  WorkItem& it = phase.batch.items[phase.batch.nItems - 1];
  it.elemStart = elemStart;
  it.elemCount = elemCount;
  it.connStart = int16_t(phase.nConns);
  it.nConns = int16_t(conns.size());
  for (Connector* c : conns) {
    phase.batch.conns[phase.nConns] = nullptr;  // bound after connecting (group_launch.cc)
    if (c != nullptr) phase.tableConns.push_back({phase.nConns, c});
    phase.nConns++;
  }
  return tcclSuccess;
}

tcclResult_t planTree(const CommContext* comm, ConnectorTable& connectors, CommPlan& plan) {
  // Shapes in order of first appearance.
  std::vector<Shape> shapes;
  std::map<ShapeKey, size_t> index;
  for (const CollTask& t : plan.tasks->colls) {
    if (t.algo == Algo::kRing) continue;
    WorkElem e;
    TCCL_CHECK(makeCollElem(t, plan.onDevice, &e));
    // The double tree cuts all-reduce in two halves, one per tree; the others run whole.
    const bool treeAllReduce = t.algo == Algo::kTree && t.func == WorkFunc::kAllReduce;
    const bool small = t.count * typeSize(t.dtype) <= kTreeUpDownMaxBytes;
    e.nChannels = treeAllReduce && !small ? 2 : 1;
    const bool rooted = t.func == WorkFunc::kBroadcast || t.func == WorkFunc::kReduce;
    ShapeKey key{t.algo, int(t.func),
                 rooted ? t.root : treeAllReduce && small ? kSingleTree : kNoRoot};
    auto [pos, isNew] = index.insert({key, shapes.size()});
    if (isNew) shapes.push_back(Shape{key, {}});
    shapes[pos->second].elems.push_back(e);
  }
  const int n = comm->nranks, r = comm->rank;
  for (size_t first = 0; first < shapes.size(); first += kMaxShapes) {
    Phase phase;
    phase.batch.rank = r;
    phase.batch.nranks = n;
    for (size_t i = first; i < shapes.size() && i < first + kMaxShapes; i++) {
      const auto [algo, func, root] = shapes[i].key;
      const int channel = 2 * int(i - first);
      ElemRange elems;
      TCCL_CHECK(appendElems(phase, shapes[i].elems, &elems));
      // A tree that does not span the ranks would hang or crash the executors: refuse it.
      if (algo == Algo::kTree) {
        const bool dtree = WorkFunc(func) == WorkFunc::kAllReduce && root == kNoRoot;
        const int tt = dtree ? 2 : 1;
        for (int t = 0; t < tt; t++) {
          const bool ok = treeIsValid(n, [&, t, root = root, func = func](int rank) {
            return WorkFunc(func) == WorkFunc::kAllReduce ? doubleTree(rank, n, t)
                                                           : rootedTree(rank, n, root);
          });
          if (!ok) {
            TCCL_WARN("the tree for %s over %d ranks is not a spanning tree (trees.cc)",
                      func == int(WorkFunc::kAllReduce) ? "AllReduce" : "Broadcast/Reduce", n);
            return tcclInternalError;
          }
        }
      }
      if (algo == Algo::kRecDoubling) {
        TCCL_CHECK(addRecDoublingItem(comm, connectors, phase, channel, elems));
      } else if (root == kSingleTree) {
        TCCL_CHECK(addTreeItems(connectors, phase, WorkFunc(func), doubleTree(r, n, 0), 0,
                                channel, elems, /*upDown=*/true));
      } else if (WorkFunc(func) == WorkFunc::kAllReduce) {
        for (int t = 0; t < 2; t++) {
          TCCL_CHECK(addTreeItems(connectors, phase, WorkFunc(func), doubleTree(r, n, t), t,
                                  channel + t, elems));
        }
      } else {
        TCCL_CHECK(addTreeItems(connectors, phase, WorkFunc(func), rootedTree(r, n, root), 0,
                                channel, elems));
      }
    }
    TCCL_INFO(kColl, "tree plan: %zu shape(s), %d item(s)",
              std::min(shapes.size() - first, size_t(kMaxShapes)), phase.batch.nItems);
    plan.phases.push_back(std::move(phase));
  }
  return tcclSuccess;
}

}  // namespace tccl
