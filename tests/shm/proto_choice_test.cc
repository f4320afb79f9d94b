/*
 * tests/shm/proto_choice_test.cc: TCCL_PROTO and the protocol half of the cost model's choice,
 * without communication.
 *
 * What it is: unit tests of chapter 5's planning of the LL protocol, compiled from the stage's
 * tuning.cc: TCCL_PROTO parsing (lists, ^, per-collective sections, LL128, errors), and the
 * choice -- Simple everywhere LL cannot run, LL for small messages and Simple for large ones
 * where it can, LL128 between them where the caller allows it, nothing when TCCL_ALGO and
 * TCCL_PROTO together leave nothing.
 *
 * Invariants: no sockets, no MPI, no GPU.
 * NCCL counterpart: none (NCCL's NCCL_PROTO parsing has no unit test).
 * Added in: stage 5.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <utility>

#include "tuning.h"

namespace tccl {

// A failed comparison names the protocol (an enum class has no operator<< for GoogleTest).
void PrintTo(WorkProto p, std::ostream* os) { *os << protoName(p); }

namespace {

const int kAR = 0, kAG = 1, kBC = 3;  // collIndex of the collectives used below

AlgoMask parsed(const std::string& value) {
  AlgoMask m;
  std::string why;
  EXPECT_EQ(parseAlgoList(value, &m, &why), tcclSuccess) << value << ": " << why;
  return m;
}

ProtoMask parsedProto(const std::string& value) {
  ProtoMask m;
  std::string why;
  EXPECT_EQ(parseProtoList(value, &m, &why), tcclSuccess) << value << ": " << why;
  return m;
}

TEST(ProtoList, ListsExclusionsSectionsAndErrors) {
  ProtoMask m = parsedProto("");
  for (auto& row : m.allowed) {
    EXPECT_TRUE(row[idx(WorkProto::kSimple)] && row[idx(WorkProto::kLL)] && row[idx(WorkProto::kLL128)]);
  }
  m = parsedProto("LL");
  EXPECT_TRUE(m.allowed[kAR][idx(WorkProto::kLL)]);
  EXPECT_FALSE(m.allowed[kAR][idx(WorkProto::kSimple)]);
  m = parsedProto("^ll");
  EXPECT_FALSE(m.allowed[kBC][idx(WorkProto::kLL)]);
  EXPECT_TRUE(m.allowed[kBC][idx(WorkProto::kSimple)]);
  m = parsedProto("allreduce:ll;broadcast:simple");
  EXPECT_FALSE(m.allowed[kAR][idx(WorkProto::kSimple)]);
  EXPECT_FALSE(m.allowed[kBC][idx(WorkProto::kLL)]);
  EXPECT_TRUE(m.allowed[kAG][idx(WorkProto::kLL)] && m.allowed[kAG][idx(WorkProto::kSimple)]);
  m = parsedProto("LL128,Simple");
  EXPECT_TRUE(m.allowed[kAR][idx(WorkProto::kSimple)] && m.allowed[kAR][idx(WorkProto::kLL128)]);
  EXPECT_FALSE(m.allowed[kAR][idx(WorkProto::kLL)]);
  m = parsedProto("^ll128");  // LL's line is not LL128's
  EXPECT_TRUE(m.allowed[kAR][idx(WorkProto::kLL)] && !m.allowed[kAR][idx(WorkProto::kLL128)]);
  for (const char* bad : {"bogus", "ll,", "allreduce:fast", "tree", "ll256"}) {
    std::string why;
    EXPECT_EQ(parseProtoList(bad, &m, &why), tcclInvalidArgument) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}

TEST(CostModel, ProtocolChoice) {
  WorkProto proto = WorkProto::kSimple;
  auto pick = [&](WorkFunc f, int n, size_t bytes, bool ll, const std::string& algos = "",
                  const std::string& protos = "") {
    return chooseAlgorithm(parsed(algos), parsedProto(protos), f, n, bytes, /*onDevice=*/true, ll,
                           &proto, nullptr, 0);
  };
  // Without LL (host buffers, a peer over the network) every choice is Simple.
  for (size_t bytes : {size_t(8), size_t(64) << 20}) {
    EXPECT_GE(pick(WorkFunc::kAllReduce, 4, bytes, false), 0);
    EXPECT_EQ(proto, WorkProto::kSimple) << bytes;
  }
  // With it, small messages take LL and large ones Simple: its flags halve the bandwidth.
  for (int n : {2, 4, 5}) {
    EXPECT_GE(pick(WorkFunc::kAllReduce, n, 8, true), 0);
    EXPECT_EQ(proto, WorkProto::kLL) << n << " ranks, 8 B";
    EXPECT_GE(pick(WorkFunc::kAllReduce, n, size_t(256) << 20, true), 0);
    EXPECT_EQ(proto, WorkProto::kSimple) << n << " ranks, 256 MiB";
    EXPECT_GE(pick(WorkFunc::kAllGather, n, 8, true), 0);
    EXPECT_EQ(proto, WorkProto::kLL) << n << " ranks, all-gather 8 B";
  }
  // The crossover sits where it was measured on 2 H200 (docs/results/h200x2/tune/): the ring's
  // all-reduce was faster on LL at 1 MiB and on Simple at 2 MiB with 2 ranks, on LL at 2 MiB
  // and on Simple at 4 MiB with 4.
  const std::pair<int, size_t> llFaster[] = {{2, size_t(1) << 20}, {4, size_t(2) << 20}};
  for (auto [n, bytes] : llFaster) {
    EXPECT_GE(pick(WorkFunc::kAllReduce, n, bytes, true, "ring", "^ll128"), 0);
    EXPECT_EQ(proto, WorkProto::kLL) << n << " ranks, " << bytes << " B";
    EXPECT_GE(pick(WorkFunc::kAllReduce, n, 2 * bytes, true, "ring", "^ll128"), 0);
    EXPECT_EQ(proto, WorkProto::kSimple) << n << " ranks, " << 2 * bytes << " B";
  }
  // Where LL128 may run (NVLink), the model weighs it with its measured row: on 2 H200 it is
  // slower than LL below about 2.6 MB and than Simple above, so it is not chosen on its own...
  for (size_t bytes : {size_t(8), size_t(1) << 20, size_t(4) << 20, size_t(256) << 20}) {
    EXPECT_GE(pick(WorkFunc::kAllReduce, 2, bytes, true), 0);
    EXPECT_NE(proto, WorkProto::kLL128) << bytes << " B";
    EXPECT_LT(std::min(predictTimeUs(WorkFunc::kAllReduce, Algo::kRing, WorkProto::kLL, 2, bytes, true),
                       predictTimeUs(WorkFunc::kAllReduce, Algo::kRing, WorkProto::kSimple, 2, bytes, true)),
              predictTimeUs(WorkFunc::kAllReduce, Algo::kRing, WorkProto::kLL128, 2, bytes, true))
        << bytes << " B";
  }
  // ... and TCCL_PROTO=LL128 runs it at any size, on the ring.
  EXPECT_EQ(pick(WorkFunc::kAllGather, 2, size_t(128) << 10, true, "", "ll128"), idx(Algo::kRing));
  EXPECT_EQ(proto, WorkProto::kLL128);
  // LL128 is the ring's only: forced with the tree, nothing is left.
  EXPECT_EQ(pick(WorkFunc::kAllReduce, 4, size_t(1) << 20, true, "tree", "ll128"), -1);
  // The trees have no LL: forced together, nothing is left.
  EXPECT_EQ(pick(WorkFunc::kAllReduce, 4, 8, true, "tree", "ll"), -1);
  EXPECT_EQ(pick(WorkFunc::kAllReduce, 4, 8, true, "tree"), idx(Algo::kTree));
  EXPECT_EQ(proto, WorkProto::kSimple);
  // TCCL_PROTO=LL where LL cannot run: nothing is left either.
  EXPECT_EQ(pick(WorkFunc::kAllReduce, 4, 8, false, "", "ll"), -1);
  // Forcing LL wins over the model at any size.
  EXPECT_EQ(pick(WorkFunc::kAllReduce, 4, size_t(256) << 20, true, "ring", "ll"), idx(Algo::kRing));
  EXPECT_EQ(proto, WorkProto::kLL);
  // One rank: a local copy, Simple.
  EXPECT_EQ(pick(WorkFunc::kAllReduce, 1, 8, true), idx(Algo::kRing));
  EXPECT_EQ(proto, WorkProto::kSimple);
}

}  // namespace
}  // namespace tccl
