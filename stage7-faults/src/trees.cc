/*
 * trees.cc: the binary, double binary and rooted trees. See trees.h.
 *
 * The binary tree, by example (n = 8; a node's level is its lowest set bit):
 *
 *                0                     rank 0: the root, one child
 *                |
 *                4                     bit 4
 *             /     \
 *            2       6                 bit 2
 *           / \     / \
 *          1   3   5   7               bit 1: leaves (every odd rank)
 *
 * A rank r with lowest set bit b hangs below r - b or r + b (whichever of the two has bit 2b
 * set, i.e. (r ^ b) | 2b, if that exists) and has children r - b/2 and r + b/2; a child past
 * the end is replaced by the nearest node of a lower level that exists, so every n works.
 *
 * Added in: stage 3.
 */
#include "trees.h"

namespace tccl {

TreeNode binaryTree(int rank, int nranks) {
  TreeNode node;
  int bit = 1;  // rank's lowest set bit; for rank 0 the first power of two >= nranks
  while (bit < nranks && (rank & bit) == 0) bit <<= 1;
  if (rank == 0) {
    if (nranks > 1) node.child[1] = bit >> 1;  // 0's only child heads the rest
    return node;
  }
  // >>> exercise 3.1: a node's parent and children
  // The parent: the node one level up on our side, or, past the end, the one on the other.
  int up = (rank ^ bit) | (bit << 1);
  if (up >= nranks) up = rank ^ bit;
  node.parent = up;
  // The children: half a level down on each side. The lower one always exists; the upper
  // one, past the end, moves down the levels until it fits (or we have none).
  int low = bit >> 1;
  if (low > 0) node.child[0] = rank - low;
  while (low > 0 && rank + low >= nranks) low >>= 1;
  if (low > 0) node.child[1] = rank + low;
  // <<< exercise 3.1
  return node;
}

namespace {

/// A tree on relabelled ranks: node v = toNode(r); map a neighbour back with toRank.
template <typename ToNode, typename ToRank>
TreeNode relabel(int rank, int nranks, ToNode toNode, ToRank toRank) {
  TreeNode t = binaryTree(toNode(rank), nranks);
  TreeNode out;
  out.parent = t.parent < 0 ? -1 : toRank(t.parent);
  for (int i = 0; i < 2; i++) out.child[i] = t.child[i] < 0 ? -1 : toRank(t.child[i]);
  return out;
}

}  // namespace

TreeNode doubleTree(int rank, int nranks, int t) {
  if (t == 0) return binaryTree(rank, nranks);
  if (nranks % 2 == 0) {
    // Mirror: the odd ranks, leaves of tree 0, become the even nodes of tree 1.
    auto mirror = [nranks](int r) { return nranks - 1 - r; };
    return relabel(rank, nranks, mirror, mirror);
  }
  // Odd n: mirroring maps odd ranks to odd ranks, which would be leaves in both trees; shift
  // by one instead (ranks 1..n-1 are then inner in exactly one tree, rank 0 in both).
  return relabel(rank, nranks, [nranks](int r) { return (r - 1 + nranks) % nranks; },
                 [nranks](int v) { return (v + 1) % nranks; });
}

TreeNode rootedTree(int rank, int nranks, int root) {
  return relabel(rank, nranks, [=](int r) { return (r - root + nranks) % nranks; },
                 [=](int v) { return (v + root) % nranks; });
}

int treeDepth(int nranks) {
  int depth = 0;
  for (int r = 0; r < nranks; r++) {
    int d = 0;
    for (TreeNode n = binaryTree(r, nranks); !n.isRoot(); n = binaryTree(n.parent, nranks)) d++;
    if (d > depth) depth = d;
  }
  return depth;
}

bool treeIsValid(int nranks, const std::function<TreeNode(int)>& nodeOf) {
  int roots = 0, links = 0;
  for (int r = 0; r < nranks; r++) {
    const TreeNode node = nodeOf(r);
    if (node.isRoot()) roots++;
    if (node.parent >= nranks || node.parent == r) return false;
    if (!node.isRoot()) {
      const TreeNode p = nodeOf(node.parent);
      if (p.child[0] != r && p.child[1] != r) return false;
    }
    for (int c : node.child) {
      if (c < 0) continue;
      if (c >= nranks || c == r || nodeOf(c).parent != r) return false;
      links++;
    }
  }
  // n-1 agreeing links and one root: a tree (a cycle would need n links).
  return roots == 1 && links == nranks - 1;
}

}  // namespace tccl
