/*
 * device/tree.h: the tree algorithms, written as loops over the primitives.
 *
 * What it is: chapter 3's heart. A tree node talks to its parent and up to two children (the
 * trees are built on the host, trees.h; an item gets the node's connections in the batch's
 * conns table, in TreeSlot order). All-reduce is a reduce up the tree followed by a broadcast
 * down it, both pipelined chunk by chunk:
 *
 *   up    (every non-root node)  leaf: send(in)            inner: recvReduceSend(in)
 *   root                         recvReduceCopySend(in -> out): the result, turned around
 *   down  (every non-root node)  leaf: recv(out)           inner: recvCopySend(out)
 *
 * That is a large all-reduce, on the double tree (a small one differs at the root, below). A
 * non-root node runs its up half and its down half as two items side by side (NCCL's
 * runTreeSplit gives them two groups of warps): chunk c can travel down while chunk c+1 still
 * travels up, so a tree all-reduce takes about 2 log n chunk times plus the data time instead
 * of 2 log n times the whole data. An inner node receives from two children at once (fan-in,
 * primitives.h) and sends to two (fan-out).
 *
 * A small all-reduce (plan_tree.cc says how small) has no pipeline to fill: it runs on one
 * tree, and every node runs one kTreeUpDown item, the whole up half and then the whole down
 * half (NCCL's runTreeUpDown, which its LL protocols use for small messages). One item instead
 * of up to four per rank is what the latency of a small call is made of. Its root does not
 * turn chunks around on the way up (that could fill the FIFO of a parent still sending up,
 * which would then stop taking chunks from below: a deadlock); it keeps the result, and its
 * down half sends it.
 *
 * All-reduce runs on the double binary tree: the data is cut in two halves (channels 0 and 1 of
 * the elem), tree 0 carries the first and tree 1 the second. A rank is a leaf in one tree and
 * an inner node in the other (trees.h), so each rank sends and receives about S per direction,
 * as in a ring, but in 2 log n steps instead of 2(n-1).
 *
 * Broadcast is the down half alone and Reduce the up half alone, on a tree rooted at the root.
 *
 * Invariants: every rank cuts the same chunks of the same half (ringSlice and the chunk size
 * depend only on the elem); a node's up item reads only `in` and its down item writes only
 * `out`, and chunk c reaches a node's down item only after its up item has sent chunk c, so
 * the two may run concurrently even in place (in == out); pre() touches each rank's input once
 * (as it enters, on the way up) and post() each result once (at the root). Up-down items
 * cannot deadlock whatever the FIFO size: nobody sends down before the root has received
 * everything, so every up half runs to its end, and each down half then waits only on its
 * parent.
 *
 * NCCL counterpart: src/device/all_reduce.h (runTreeUpDown, runTreeSplit); NCCL's Broadcast
 * and Reduce are ring-only, these two trees are tccl's.
 * Added in: stage 3.
 */
#ifndef TCCL_DEVICE_TREE_H_
#define TCCL_DEVICE_TREE_H_

#include "device/primitives.h"
#include "device/ring.h"
#include "device/work.h"

namespace tccl {

/// Where a tree item's connections are in WorkBatch::conns (from it.connStart); null: none.
/// Dense from 0: idx(s) is the offset, and an item has kTreeSlots of them.
enum class TreeSlot : int {
  kRecvParent = 0,
  kSendParent = 1,
  kRecvChild0 = 2,
  kRecvChild1 = 3,
  kSendChild0 = 4,
  kSendChild1 = 5,
};
constexpr int kTreeSlots = 6;
TCCL_HOST_DEVICE constexpr int idx(TreeSlot s) { return static_cast<int>(s); }  // the offset

/// Child i's slots (i = 0, 1): each direction's two child slots are consecutive.
TCCL_HOST_DEVICE constexpr TreeSlot treeRecvChild(int i) {
  return static_cast<TreeSlot>(idx(TreeSlot::kRecvChild0) + i);
}
TCCL_HOST_DEVICE constexpr TreeSlot treeSendChild(int i) {
  return static_cast<TreeSlot>(idx(TreeSlot::kSendChild0) + i);
}

TCCL_HOST_DEVICE inline ConnInfo* treeConn(const WorkBatch& b, const WorkItem& it, TreeSlot s) {
  return b.conns[it.connStart + idx(s)];
}

/// The root of its tree: a kTreeRoot item, or an up-down item without a parent.
TCCL_HOST_DEVICE inline bool treeIsRoot(const WorkBatch& b, const WorkItem& it) {
  return it.kind == WorkKind::kTreeRoot ||
         (it.kind == WorkKind::kTreeUpDown && treeConn(b, it, TreeSlot::kSendParent) == nullptr);
}

TCCL_HOST_DEVICE inline bool treeHasChildren(const WorkBatch& b, const WorkItem& it) {
  return treeConn(b, it, TreeSlot::kRecvChild0) || treeConn(b, it, TreeSlot::kRecvChild1) ||
         treeConn(b, it, TreeSlot::kSendChild0) || treeConn(b, it, TreeSlot::kSendChild1);
}

/// The up half: children (+) own input -> parent; at the root, -> out (and down again when
/// `turnAround`, the all-reduce root).
template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE WorkStatus treeUp(Backend& be, const WorkBatch& b, const WorkItem& it,
                                   const RingSlice& s, const T* in, T* out, Fn fn,
                                   bool turnAround) {
  const bool root = treeIsRoot(b, it);
  const bool leaf = !treeHasChildren(b, it);
  ConnInfo* send0 = root ? (turnAround ? treeConn(b, it, TreeSlot::kSendChild0) : nullptr)
                         : treeConn(b, it, TreeSlot::kSendParent);
  ConnInfo* send1 = root && turnAround ? treeConn(b, it, TreeSlot::kSendChild1) : nullptr;
  PrimitivesFan<T, Fn, Backend, Fan<2, 2>> prims(
      be, {treeConn(b, it, TreeSlot::kRecvChild0), treeConn(b, it, TreeSlot::kRecvChild1)},
      {send0, send1}, fn);
  // >>> exercise 3.2: the tree's up half
  for (size_t off = s.begin; off < s.end; off += s.chunk) {
    const size_t len = minSize(s.chunk, s.end - off);
    const int c = int((off - s.begin) / s.chunk);
    if (root && turnAround) {
      prims.chunk(c).recvReduceCopySend(in + off, out + off, len, /*postOp=*/true);
    } else if (root) {
      prims.chunk(c).recvReduceCopy(in + off, out + off, len, /*postOp=*/true);
    } else if (leaf) {
      prims.chunk(c).send(in + off, len);
    } else {
      prims.chunk(c).recvReduceSend(in + off, len);
    }
  }
  // <<< exercise 3.2
  return prims.finish();
}

/// The down half: parent -> out -> children; at the root, in -> out -> children (Broadcast)
/// or out -> children (the up-down all-reduce: the up half left the result in out).
template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE WorkStatus treeDown(Backend& be, const WorkBatch& b, const WorkItem& it,
                                     const RingSlice& s, const T* in, T* out, Fn fn) {
  const bool root = treeIsRoot(b, it);
  const bool leaf = !treeHasChildren(b, it);
  // Fan<2, 2> as on the way up (one receive here): one primitives type per tree node, as
  // NCCL's runTreeUpDown, so each reduction compiles one tree instance, not two.
  PrimitivesFan<T, Fn, Backend, Fan<2, 2>> prims(
      be, {root ? nullptr : treeConn(b, it, TreeSlot::kRecvParent), nullptr},
      {treeConn(b, it, TreeSlot::kSendChild0), treeConn(b, it, TreeSlot::kSendChild1)}, fn);
  for (size_t off = s.begin; off < s.end; off += s.chunk) {
    const size_t len = minSize(s.chunk, s.end - off);
    const int c = int((off - s.begin) / s.chunk);
    if (root && it.kind == WorkKind::kTreeUpDown) {
      prims.chunk(c).send(out + off, len);
    } else if (root) {
      prims.chunk(c).copySend(in + off, out + off, len);
    } else if (leaf) {
      prims.chunk(c).recv(out + off, len);
    } else {
      prims.chunk(c).recvCopySend(out + off, len);
    }
  }
  return prims.finish();
}

/// All-reduce on one tree of the double binary tree (the item's channel is the tree).
template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE WorkStatus treeAllReduce(Backend& be, const WorkBatch& b, const WorkItem& it,
                                          const RingSlice& s, const T* in, T* out, Fn fn) {
  if (it.kind == WorkKind::kTreeDown) return treeDown<T>(be, b, it, s, in, out, fn);
  if (it.kind == WorkKind::kTreeUpDown) {
    // Up to the end of the slice, then down: the root keeps the result on the way up. Its
    // send() of that result must not apply pre() (a premulsum would scale it again): chained.
    const WorkStatus st = treeUp<T>(be, b, it, s, in, out, fn, /*turnAround=*/false);
    if (st != WorkStatus::kOk) return st;
    return treeDown<T>(be, b, it, s, in, out, chained(fn));
  }
  return treeUp<T>(be, b, it, s, in, out, fn, /*turnAround=*/true);
}

}  // namespace tccl

#endif  // TCCL_DEVICE_TREE_H_
