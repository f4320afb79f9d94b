/*
 * tests/shm/p2p_order_test.cc: large send/recv on the GPU -- the parts a message is cut into,
 * and why a p2p kernel with fewer blocks than items cannot deadlock.
 *
 * What it is: unit tests of two pure functions of chapter 5, without communication.
 *  - p2pPart (src/device/p2p.h): the part of a message that one channel moves. The parts of
 *    every cut must tile the message exactly, with 16-byte aligned boundaries.
 *  - p2pOrderKey (src/plan.h): the order every rank gives its p2p items. A kernel with fewer
 *    blocks than items runs block b's items b, b + blocks, ... in turns (kernel_entry.cuh).
 *    The test simulates that on random groups: each rank's items sorted by the key and dealt
 *    to its blocks; an item finishes only while its peer's matching item is also at the head
 *    of a block (a large message needs both ends at once). With the key every group finishes;
 *    with a plausible order that is not shared by the ranks (sends first, then receives, by
 *    peer: what the planner did before stage 5 bounded the grid), a ring shift on one block
 *    per rank deadlocks -- which shows the simulation can tell.
 *
 * Invariants: no sockets, no MPI, no GPU; random groups from fixed seeds.
 * NCCL counterpart: NCCL's p2p schedule (src/enqueue.cc, scheduleP2pTasksToPlan, and
 * ncclP2pPartBounds in src/include/device.h) has no unit test.
 * Added in: stage 5.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "device/p2p.h"
#include "plan.h"

namespace tccl {
namespace {

TEST(P2pPart, PartsTileTheMessageOnSixteenByteBoundaries) {
  for (uint64_t bytes : {uint64_t(1) << 20, (uint64_t(1) << 20) + 1, uint64_t(3000017),
                         uint64_t(256) << 20, (uint64_t(64) << 20) + 15}) {
    for (int n = 1; n <= 32; n++) {
      uint64_t next = 0;
      for (int c = 0; c < n; c++) {
        uint64_t off = 0, len = 0;
        p2pPart(bytes, c, n, &off, &len);
        EXPECT_EQ(off, next) << bytes << " bytes, part " << c << " of " << n;
        EXPECT_EQ(off % 16, 0u) << bytes << " bytes, part " << c << " of " << n;
        EXPECT_GT(len, 0u) << bytes << " bytes, part " << c << " of " << n;
        next = off + len;
      }
      EXPECT_EQ(next, bytes) << bytes << " bytes in " << n << " parts";
    }
  }
}

/// One item of one rank: a part (channel) of the messages to or from one peer.
struct SimItem {
  int peer, channel;
  bool isSend;
};

/// A group: for each ordered pair (sender, receiver) that exchanges anything, the number of
/// channels (parts) of its largest message -- the same at both ends, as the planner's cut.
struct SimGroup {
  int nranks;
  std::vector<std::vector<int>> channels;  // [sender][receiver], 0: nothing
};

using Order = std::function<bool(int rank, const SimItem&, const SimItem&)>;

/// Runs the group with at most `blocks` blocks per rank (as the launcher: one per item up to
/// that many, so ranks may have different counts), each rank's items sorted by `less` and
/// dealt round-robin. True when every item finished.
bool simulate(const SimGroup& g, int blocks, const Order& less) {
  std::vector<std::vector<std::vector<SimItem>>> queues(g.nranks);  // [rank][block] -> items
  for (int r = 0; r < g.nranks; r++) {
    std::vector<SimItem> items;
    for (int p = 0; p < g.nranks; p++) {
      for (int c = 0; c < g.channels[r][p]; c++) items.push_back({p, c, true});
      for (int c = 0; c < g.channels[p][r]; c++) items.push_back({p, c, false});
    }
    std::sort(items.begin(), items.end(),
              [&](const SimItem& a, const SimItem& b) { return less(r, a, b); });
    const size_t nb = std::max<size_t>(1, std::min(items.size(), size_t(blocks)));
    queues[r].resize(nb);
    for (size_t i = 0; i < items.size(); i++) queues[r][i % nb].push_back(items[i]);
  }
  std::vector<std::vector<size_t>> head(g.nranks);
  for (int r = 0; r < g.nranks; r++) head[size_t(r)].assign(queues[size_t(r)].size(), 0);
  // Is (peer's item matching rank r's `it`) at the head of one of peer's blocks?
  auto headOf = [&](int rank, int peer, int channel, bool isSend, int* block) {
    for (int b = 0; b < int(queues[rank].size()); b++) {
      const auto& q = queues[rank][size_t(b)];
      if (head[rank][size_t(b)] < q.size()) {
        const SimItem& h = q[head[rank][size_t(b)]];
        if (h.peer == peer && h.channel == channel && h.isSend == isSend) {
          *block = b;
          return true;
        }
      }
    }
    return false;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < g.nranks; r++) {
      for (int b = 0; b < int(queues[r].size()); b++) {
        const auto& q = queues[r][size_t(b)];
        if (head[r][size_t(b)] >= q.size()) continue;
        const SimItem it = q[head[r][size_t(b)]];
        int pb = -1;
        if (headOf(it.peer, r, it.channel, !it.isSend, &pb)) {  // both ends at once: done
          head[r][size_t(b)]++;
          head[it.peer][size_t(pb)]++;
          progress = true;
        }
      }
    }
  }
  for (int r = 0; r < g.nranks; r++) {
    for (int b = 0; b < int(queues[r].size()); b++) {
      if (head[r][size_t(b)] < queues[r][size_t(b)].size()) return false;
    }
  }
  return true;
}

bool keyOrder(int rank, const SimItem& a, const SimItem& b) {
  return p2pOrderKey(rank, a.peer, a.channel, a.isSend) <
         p2pOrderKey(rank, b.peer, b.channel, b.isSend);
}

TEST(P2pOrder, EveryGroupFinishesInTurns) {
  std::mt19937 rng(20261126);
  int groups = 0;
  for (int trial = 0; trial < 400; trial++) {
    SimGroup g;
    g.nranks = 2 + int(rng() % 7);
    g.channels.assign(size_t(g.nranks), std::vector<int>(size_t(g.nranks), 0));
    for (int s = 0; s < g.nranks; s++) {
      for (int d = 0; d < g.nranks; d++) {
        if (s != d && rng() % 3 != 0) g.channels[size_t(s)][size_t(d)] = 1 + int(rng() % 6);
      }
    }
    for (int blocks : {1, 2, 3, 5, 8, 64}) {
      EXPECT_TRUE(simulate(g, blocks, keyOrder))
          << "trial " << trial << ": " << g.nranks << " ranks, " << blocks << " blocks";
      groups++;
    }
  }
  EXPECT_EQ(groups, 2400);
}

TEST(P2pOrder, AnOrderTheRanksDoNotShareDeadlocks) {
  // A ring shift: rank r sends to r + 1 and receives from r - 1, two parts each.
  SimGroup ring;
  ring.nranks = 4;
  ring.channels.assign(4, std::vector<int>(4, 0));
  for (int r = 0; r < 4; r++) ring.channels[size_t(r)][size_t((r + 1) % 4)] = 2;
  const Order sendsFirst = [](int, const SimItem& a, const SimItem& b) {
    if (a.isSend != b.isSend) return a.isSend;
    return std::tie(a.peer, a.channel) < std::tie(b.peer, b.channel);
  };
  EXPECT_FALSE(simulate(ring, 1, sendsFirst)) << "every rank's one block waits in its send";
  EXPECT_TRUE(simulate(ring, 4, sendsFirst)) << "one block per item: nothing waits in turn";
  EXPECT_TRUE(simulate(ring, 1, keyOrder));
}

}  // namespace
}  // namespace tccl
