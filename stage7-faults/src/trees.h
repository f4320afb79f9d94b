/*
 * trees.h: the shapes of the trees a collective runs on.
 *
 * What it is: for a rank, its parent and (up to two) children in
 *  - the binary tree NCCL builds over nodes (ncclGetBtree): ranks in order, a rank's level is
 *    its lowest set bit; rank 0 is the root, with one child (the largest power of two below
 *    nranks); an odd rank is a leaf. Depth ceil(log2 n).
 *  - the double binary tree (ncclGetDtree): the tree above and its complement -- mirrored
 *    (rank -> n-1-rank) when n is even, shifted by one when n is odd -- so that the leaves of one
 *    tree (half the ranks) are inner nodes of the other. All-reduce cuts its data in two halves,
 *    one per tree: every rank then sends and receives about as much as in a ring, in 2 log n
 *    steps instead of 2(n-1).
 *  - a rooted tree for Broadcast and Reduce: the binary tree relabelled so that `root` sits where
 *    rank 0 does (rank r is node (r - root) mod n).
 *
 * Invariants: every rank computes the same trees from (nranks, root) alone; the parent of r has
 * r as a child and vice versa; each tree spans all ranks and has exactly one root.
 *
 * NCCL counterpart: src/graph/trees.cc (ncclGetBtree, ncclGetDtree); NCCL's trees span nodes
 * and chain the GPUs within a node, ours span ranks.
 * Added in: stage 3.
 */
#ifndef TCCL_TREES_H_
#define TCCL_TREES_H_

#include <functional>

namespace tccl {

/// A rank's place in one tree; -1 where there is no such neighbour.
struct TreeNode {
  int parent = -1;
  int child[2] = {-1, -1};
  bool isRoot() const { return parent < 0; }
  int nChildren() const { return (child[0] >= 0) + (child[1] >= 0); }
};

/// NCCL's binary tree over ranks 0..n-1, rooted at 0.
TreeNode binaryTree(int rank, int nranks);
/// Tree t (0 or 1) of the double binary tree.
TreeNode doubleTree(int rank, int nranks, int t);
/// The binary tree with `root` in rank 0's place (Broadcast, Reduce).
TreeNode rootedTree(int rank, int nranks, int root);
/// Levels of a tree: the number of hops from the deepest leaf to the root.
int treeDepth(int nranks);
/// Whether nodeOf(0..n-1) describe one tree spanning the ranks: neighbours in range, parent
/// and child links agreeing, exactly one root, no cycle. The planner checks every tree it uses.
bool treeIsValid(int nranks, const std::function<TreeNode(int)>& nodeOf);

}  // namespace tccl

#endif  // TCCL_TREES_H_
