/*
 * tests/tree/tree_shapes_test.cc: the trees and the cost model, without communication.
 *
 * What it is: unit tests of chapter 3's two pure parts, compiled from the stage's sources
 * (trees.cc, tuning.cc):
 *  - every tree (binary, both halves of the double tree, rooted at every root) spans 1..64
 *    ranks; the binary tree is NCCL's (known shapes at 5 and 8 ranks); in the double tree no
 *    rank is an inner node of both trees when n is even (and one rank is when n is odd); depth
 *    is ceil(log2 n);
 *  - TCCL_ALGO parsing: lists, ^, per-collective sections, case, NCCL's other names, errors;
 *  - the cost model's choice at fixed points (where the measured table puts the crossovers),
 *    and that the choice is -1 when the mask leaves nothing.
 *
 * Invariants: no sockets, no MPI; a failure names the rank count and the tree.
 * NCCL counterpart: none (NCCL has no unit tests of ncclGetDtree); nccl-tests cover it end to end.
 * Added in: stage 3.
 */
#include <gtest/gtest.h>

#include <string>

#include "trees.h"
#include "tuning.h"

namespace tccl {
namespace {

TEST(TreeShapes, EveryTreeSpansTheRanks) {
  for (int n = 1; n <= 64; n++) {
    for (int t = 0; t < 2; t++) {
      EXPECT_TRUE(treeIsValid(n, [&](int r) { return doubleTree(r, n, t); }))
          << "double tree " << t << " over " << n << " ranks";
    }
    for (int root = 0; root < n; root++) {
      EXPECT_TRUE(treeIsValid(n, [&](int r) { return rootedTree(r, n, root); }))
          << "tree rooted at " << root << " over " << n << " ranks";
      EXPECT_TRUE(rootedTree(root, n, root).isRoot());
    }
  }
}

TEST(TreeShapes, BinaryTreeIsNcclsAtFiveAndEightRanks) {
  // n = 5: 0 -> 4 -> 2 -> {1, 3} (ncclGetBtree).
  EXPECT_EQ(binaryTree(0, 5).child[1], 4);
  EXPECT_EQ(binaryTree(4, 5).parent, 0);
  EXPECT_EQ(binaryTree(4, 5).child[0], 2);
  EXPECT_EQ(binaryTree(4, 5).child[1], -1);
  EXPECT_EQ(binaryTree(2, 5).child[0], 1);
  EXPECT_EQ(binaryTree(2, 5).child[1], 3);
  // n = 8: 0 -> 4 -> {2 -> {1, 3}, 6 -> {5, 7}}.
  EXPECT_EQ(binaryTree(4, 8).child[0], 2);
  EXPECT_EQ(binaryTree(4, 8).child[1], 6);
  EXPECT_EQ(binaryTree(7, 8).parent, 6);
  EXPECT_EQ(binaryTree(6, 8).parent, 4);
  for (int r = 1; r < 8; r += 2) EXPECT_EQ(binaryTree(r, 8).nChildren(), 0) << r;
}

TEST(TreeShapes, DoubleTreeLeavesAreInnerNodesOfTheOther) {
  for (int n = 2; n <= 64; n++) {
    int innerInBoth = 0;
    for (int r = 0; r < n; r++) {
      innerInBoth += doubleTree(r, n, 0).nChildren() > 0 && doubleTree(r, n, 1).nChildren() > 0;
    }
    // Mirroring (even n) makes the two sets of inner nodes disjoint; shifting (odd n) leaves
    // exactly one rank inner in both at n >= 3.
    EXPECT_EQ(innerInBoth, n % 2 == 0 ? 0 : 1) << n << " ranks";
  }
}

TEST(TreeShapes, DepthIsCeilLog2) {
  const int expected[] = {0, 0, 1, 2, 2, 3, 3, 3, 3, 4};
  for (int n = 1; n <= 9; n++) EXPECT_EQ(treeDepth(n), expected[n]) << n << " ranks";
  EXPECT_EQ(treeDepth(64), 6);
  EXPECT_EQ(treeDepth(65), 7);
}

AlgoMask parsed(const std::string& value) {
  AlgoMask m;
  std::string why;
  EXPECT_EQ(parseAlgoList(value, &m, &why), tcclSuccess) << value << ": " << why;
  return m;
}

const int kAR = 0, kAG = 1, kBC = 3, kRed = 4;  // collIndex of the collectives used below

TEST(AlgoList, ListsExclusionsAndSections) {
  AlgoMask m = parsed("");
  for (auto& row : m.allowed) {
    for (bool a : row) EXPECT_TRUE(a);
  }
  m = parsed("tree");
  EXPECT_TRUE(m.allowed[kAR][idx(Algo::kTree)]);
  EXPECT_FALSE(m.allowed[kAR][idx(Algo::kRing)]);
  EXPECT_FALSE(m.allowed[kAG][idx(Algo::kRing)]);  // nothing left for AllGather: an error per call
  m = parsed("^Tree");
  EXPECT_FALSE(m.allowed[kAR][idx(Algo::kTree)]);
  EXPECT_TRUE(m.allowed[kAR][idx(Algo::kRing)]);
  EXPECT_TRUE(m.allowed[kAR][idx(Algo::kRecDoubling)]);
  m = parsed("RING , rd");
  EXPECT_TRUE(m.allowed[kAR][idx(Algo::kRing)]);
  EXPECT_TRUE(m.allowed[kAR][idx(Algo::kRecDoubling)]);
  EXPECT_FALSE(m.allowed[kAR][idx(Algo::kTree)]);
  // NCCL 2.24's per-collective form; collectives not named keep everything.
  m = parsed("allreduce:tree;broadcast:ring");
  EXPECT_TRUE(m.allowed[kAR][idx(Algo::kTree)]);
  EXPECT_FALSE(m.allowed[kAR][idx(Algo::kRing)]);
  EXPECT_TRUE(m.allowed[kBC][idx(Algo::kRing)]);
  EXPECT_FALSE(m.allowed[kBC][idx(Algo::kTree)]);
  EXPECT_TRUE(m.allowed[kRed][idx(Algo::kTree)]);
  // NCCL's names that tccl does not have are accepted and allow nothing.
  m = parsed("nvls,ring");
  EXPECT_TRUE(m.allowed[kAR][idx(Algo::kRing)]);
  EXPECT_FALSE(m.allowed[kAR][idx(Algo::kTree)]);
}

TEST(AlgoList, UnknownNamesAreErrors) {
  for (const char* bad : {"bogus", "ring,trees", "^", "ring,,tree", "allreduce:bogus",
                          "allreduced:ring", "ring;gather:tree"}) {
    AlgoMask m;
    std::string why;
    EXPECT_EQ(parseAlgoList(bad, &m, &why), tcclInvalidArgument) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  AlgoMask m;
  std::string why;
  ASSERT_EQ(parseAlgoList("ring,bogus", &m, &why), tcclInvalidArgument);
  EXPECT_NE(why.find("bogus"), std::string::npos) << why;
}

int choose(WorkFunc f, int n, size_t bytes, const std::string& mask = "") {
  return chooseAlgorithm(parsed(mask), f, n, bytes, /*onDevice=*/false, nullptr, 0);
}

TEST(CostModel, ChoicesAtFixedPoints) {
  // Latency: 8 bytes never goes around the ring beyond 2 ranks.
  for (int n : {2, 4, 5, 8}) {
    EXPECT_NE(choose(WorkFunc::kAllReduce, n, 8), idx(Algo::kRing)) << n << " ranks";
  }
  // Bandwidth: 64 MiB never takes recursive doubling beyond 2 ranks (every step moves all of
  // it), and at 4 and 5 ranks it takes the ring (the fewest bytes per link). Only where the
  // constants were measured: at 8 ranks the ring's 1.75 S against the tree's 2 S is within
  // the difference of their fitted bandwidths, and the choice is the fit's, not a principle.
  for (int n : {3, 4, 5, 8}) {
    EXPECT_NE(choose(WorkFunc::kAllReduce, n, 64 << 20), idx(Algo::kRecDoubling)) << n << " ranks";
  }
  for (int n : {4, 5}) {
    EXPECT_EQ(choose(WorkFunc::kAllReduce, n, 64 << 20), idx(Algo::kRing)) << n << " ranks";
  }
  // Broadcast at 16 ranks: 4 tree hops against 15 ring hops for a small message.
  EXPECT_EQ(choose(WorkFunc::kBroadcast, 16, 8), idx(Algo::kTree));
  // AllGather and ReduceScatter have the ring only.
  EXPECT_EQ(choose(WorkFunc::kAllGather, 4, 8), idx(Algo::kRing));
  EXPECT_EQ(choose(WorkFunc::kReduceScatter, 4, 1 << 20), idx(Algo::kRing));
  // Forcing wins over the model; a mask that leaves nothing gives -1.
  EXPECT_EQ(choose(WorkFunc::kAllReduce, 4, 64 << 20, "tree"), idx(Algo::kTree));
  EXPECT_EQ(choose(WorkFunc::kAllReduce, 4, 8, "ring"), idx(Algo::kRing));
  EXPECT_EQ(choose(WorkFunc::kAllGather, 4, 8, "tree"), -1);
  EXPECT_EQ(choose(WorkFunc::kBroadcast, 4, 8, "recdoubling"), -1);
  // One rank: the ring (a local copy) whatever is allowed.
  EXPECT_EQ(choose(WorkFunc::kAllReduce, 1, 8, "tree"), idx(Algo::kRing));
}

TEST(CostModel, PredictionsGrowWithBytesAndHops) {
  for (Algo a : kAlgos) {
    if (!algoSupports(WorkFunc::kAllReduce, a, 4)) continue;
    EXPECT_LT(predictTimeUs(WorkFunc::kAllReduce, a, 4, 8, false),
              predictTimeUs(WorkFunc::kAllReduce, a, 4, 1 << 20, false))
        << algoName(a);
    EXPECT_LE(predictTimeUs(WorkFunc::kAllReduce, a, 4, 8, false),
              predictTimeUs(WorkFunc::kAllReduce, a, 8, 8, false))
        << algoName(a);
  }
  char why[256];
  chooseAlgorithm(parsed(""), WorkFunc::kAllReduce, 4, 8, false, why, sizeof(why));
  EXPECT_NE(std::string(why).find("ring"), std::string::npos) << why;
  EXPECT_NE(std::string(why).find("recdoubling"), std::string::npos) << why;
}

}  // namespace
}  // namespace tccl
