/*
 * tests/p2p/p2p_patterns.h: runs one P2P pattern on one communicator and checks every byte.
 *
 * What it is: the body shared by the pattern sweep (p2p_patterns_test.cc) and the 64 Mi-element
 * cases (p2p_large_test.cc). runPattern() builds the inputs (fillData of this rank, one seed per
 * block), poisons every receive buffer, runs the pattern, waits for the device, then checks the
 * received blocks against fillData of the sending rank, that the guards around every buffer and
 * every send buffer are intact, and that buffers that are "significant on the root only" were
 * not written on the other ranks.
 *
 * Invariants: runPattern makes the same tccl calls in the same order on every rank, whatever the
 * outcome of the checks, so one rank's bad data never leaves another rank waiting. It returns
 * false (with the reason in *why) on this rank's failure only; callers combine ranks.
 *
 * NCCL counterpart: nccl-tests src/{sendrecv,alltoall,gather,scatter}.cu, in spirit.
 * Added in: stage 1.
 */
#ifndef TCCL_TESTS_P2P_P2P_PATTERNS_H_
#define TCCL_TESTS_P2P_P2P_PATTERNS_H_

#include <string>
#include <vector>

#include "p2p_buffers.h"

namespace tccl {
namespace test {
namespace p2p {

enum class Pattern {
  kPairs,           // tcclSend + tcclRecv with rank^1 in one group (self when unpaired)
  kPairsUngrouped,  // the same without a group: even ranks send first, odd ranks receive first
  kExchange,        // tcclSendRecv(peer, peer) with rank^1
  kShift,           // tcclSendRecv(rank+1, rank-1)
  kAlltoAll,
  kGather,
  kScatter,
  kNeighbor,  // tcclNeighborExchange
};

inline const char* patternName(Pattern p) {
  switch (p) {
    case Pattern::kPairs:
      return "pairs";
    case Pattern::kPairsUngrouped:
      return "pairsUngrouped";
    case Pattern::kExchange:
      return "exchange";
    case Pattern::kShift:
      return "shift";
    case Pattern::kAlltoAll:
      return "alltoall";
    case Pattern::kGather:
      return "gather";
    case Pattern::kScatter:
      return "scatter";
    case Pattern::kNeighbor:
      return "neighbor";
  }
  return "?";
}

inline std::vector<Pattern> allPatterns() {
  return {Pattern::kPairs,    Pattern::kPairsUngrouped, Pattern::kExchange, Pattern::kShift,
          Pattern::kAlltoAll, Pattern::kGather,         Pattern::kScatter,  Pattern::kNeighbor};
}

inline bool isRooted(Pattern p) { return p == Pattern::kGather || p == Pattern::kScatter; }

/// Records a failed tccl call in *why and makes the caller return false.
#define P2P_TRY(call)                                                            \
  do {                                                                           \
    tcclResult_t r_ = (call);                                                    \
    if (r_ != tcclSuccess) {                                                     \
      *why = std::string(#call) + " returned " + tcclGetErrorString(r_) + ": " + \
             tcclGetLastError(comm);                                             \
      return false;                                                              \
    }                                                                            \
  } while (0)

/// Accumulates check results without stopping at the first one (every rank keeps going).
/// `reason` is taken by reference and read only after `good` was computed (the order in which
/// arguments are evaluated is unspecified), so check(f(&reason), reason) is safe; a prefix
/// built from constant parts goes in the third argument.
struct Checker {
  bool ok = true;
  std::string why;
  void check(bool good, const std::string& reason, const std::string& prefix = "") {
    if (!good && ok) {
      ok = false;
      why = prefix + reason;
    }
  }
};

/// Runs pattern `p` (root used by gather/scatter only) with `count` elements per block and
/// checks the outcome. Returns false and explains on failure of this rank.
inline bool runPattern(tcclComm_t comm, Pattern p, DType t, size_t count, MemKind kind, int root,
                       int seed, std::string* why) {
  int rank = 0, n = 0;
  P2P_TRY(tcclCommUserRank(comm, &rank));
  P2P_TRY(tcclCommCount(comm, &n));
  const tcclDataType_t tt = toTccl(t);
  const size_t blk = count * dtypeSize(t);
  const int partner = (rank ^ 1) < n ? (rank ^ 1) : rank;
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;

  // Buffer sizes in blocks: alltoall both sides n; gather recv n; scatter send n; neighbor 2.
  size_t sendBlocks = 1, recvBlocks = 1;
  if (p == Pattern::kAlltoAll) sendBlocks = recvBlocks = n;
  if (p == Pattern::kGather) recvBlocks = n;
  if (p == Pattern::kScatter) sendBlocks = n;
  if (p == Pattern::kNeighbor) sendBlocks = recvBlocks = 2;
  GuardedBuffer send(sendBlocks * blk, kind), recv(recvBlocks * blk, kind);

  // Inputs. Block j of a multi-block send buffer uses seed+1+j, so it is told apart from its
  // neighbours; scatter's send buffer is significant on the root only and stays poison elsewhere.
  if (p == Pattern::kAlltoAll || (p == Pattern::kScatter && rank == root)) {
    for (int j = 0; j < n; j++) send.fillAt(j * blk, count, t, rank, seed + 1 + j);
  } else if (p == Pattern::kNeighbor) {
    send.fillAt(0, count, t, rank, seed + 1);    // to the left neighbour
    send.fillAt(blk, count, t, rank, seed + 2);  // to the right neighbour
  } else if (p != Pattern::kScatter) {
    send.fillAt(0, count, t, rank, seed);
  }
  // Snapshot of the send buffer, to prove tccl did not write into it.
  std::vector<uint8_t> sendBefore;
  {
    const uint8_t* v = send.view();
    sendBefore.assign(v, v + send.bytes() + 2 * GuardedBuffer::kGuard);
  }

  switch (p) {
    case Pattern::kPairs:
      P2P_TRY(tcclGroupStart());
      P2P_TRY(tcclSend(send.data(), count, tt, partner, comm, nullptr));
      P2P_TRY(tcclRecv(recv.data(), count, tt, partner, comm, nullptr));
      P2P_TRY(tcclGroupEnd());
      break;
    case Pattern::kPairsUngrouped:
      if (partner == rank) {  // a rank cannot block on a send to itself: group those two
        P2P_TRY(tcclGroupStart());
        P2P_TRY(tcclRecv(recv.data(), count, tt, partner, comm, nullptr));
        P2P_TRY(tcclSend(send.data(), count, tt, partner, comm, nullptr));
        P2P_TRY(tcclGroupEnd());
      } else if (rank % 2 == 0) {
        P2P_TRY(tcclSend(send.data(), count, tt, partner, comm, nullptr));
        P2P_TRY(tcclRecv(recv.data(), count, tt, partner, comm, nullptr));
      } else {
        P2P_TRY(tcclRecv(recv.data(), count, tt, partner, comm, nullptr));
        P2P_TRY(tcclSend(send.data(), count, tt, partner, comm, nullptr));
      }
      break;
    case Pattern::kExchange:
      P2P_TRY(tcclSendRecv(send.data(), recv.data(), count, tt, partner, partner, comm, nullptr));
      break;
    case Pattern::kShift:
      P2P_TRY(tcclSendRecv(send.data(), recv.data(), count, tt, next, prev, comm, nullptr));
      break;
    case Pattern::kAlltoAll:
      P2P_TRY(tcclAlltoAll(send.data(), recv.data(), count, tt, comm, nullptr));
      break;
    case Pattern::kGather:
      P2P_TRY(tcclGather(send.data(), recv.data(), count, tt, root, comm, nullptr));
      break;
    case Pattern::kScatter:
      P2P_TRY(tcclScatter(send.data(), recv.data(), count, tt, root, comm, nullptr));
      break;
    case Pattern::kNeighbor:
      P2P_TRY(tcclNeighborExchange(send.data(), recv.data(), count, tt, comm, nullptr));
      break;
  }
  deviceSync();

  Checker c;
  const std::string tag = std::string(patternName(p)) + " rank " + std::to_string(rank) + ": ";
  const uint8_t* r = recv.view();
  std::string reason;
  c.check(recv.guardsIntact(r, &reason), reason, tag + "recvbuff: ");
  const uint8_t* got = r + GuardedBuffer::kGuard;
  switch (p) {
    case Pattern::kPairs:
    case Pattern::kPairsUngrouped:
    case Pattern::kExchange:
      c.check(matchesInput(got, count, t, partner, seed, tag + "block", &reason), reason);
      break;
    case Pattern::kShift:
      c.check(matchesInput(got, count, t, prev, seed, tag + "block", &reason), reason);
      break;
    case Pattern::kAlltoAll:
      for (int i = 0; i < n; i++)
        c.check(matchesInput(got + i * blk, count, t, i, seed + 1 + rank,
                             tag + "block " + std::to_string(i), &reason),
                reason);
      break;
    case Pattern::kGather:
      if (rank == root) {
        for (int i = 0; i < n; i++)
          c.check(matchesInput(got + i * blk, count, t, i, seed, tag + "block " + std::to_string(i),
                               &reason),
                  reason);
      } else {
        c.check(recv.untouched(r, 0, recv.bytes(), &reason), reason,
                tag + "non-root recvbuff of gather: ");
      }
      break;
    case Pattern::kScatter:
      c.check(matchesInput(got, count, t, root, seed + 1 + rank, tag + "block", &reason), reason);
      break;
    case Pattern::kNeighbor:
      // recvbuff [0,count) comes from the left neighbour's right half, [count,2count) from the
      // right neighbour's left half (tccl.h).
      c.check(matchesInput(got, count, t, prev, seed + 2, tag + "block from the left", &reason),
              reason);
      c.check(
          matchesInput(got + blk, count, t, next, seed + 1, tag + "block from the right", &reason),
          reason);
      break;
  }
  const uint8_t* s = send.view();
  if (std::memcmp(s, sendBefore.data(), sendBefore.size()) != 0) {
    size_t b = 0;
    while (s[b] == sendBefore[b]) b++;
    c.check(false,
            tag + "sendbuff (or its guards) was written at allocation byte " + std::to_string(b));
  }
  if (!c.ok) *why = c.why;
  return c.ok;
}

/// Creates a communicator over MPI_COMM_WORLD: world rank 0 makes the id, MPI_Bcast spreads it.
/// `reversed` numbers the ranks backwards (tccl rank = size-1-world rank), which tests that
/// nothing confuses tccl ranks with world ranks.
inline tcclResult_t initWorldComm(tcclComm_t* comm, bool reversed = false) {
  tcclUniqueId id{};
  tcclResult_t res = tcclSuccess;
  if (worldRank() == 0) res = tcclGetUniqueId(&id);
  // Everyone learns whether rank 0 has an id; otherwise the others would wait in init.
  if (!allRanksOk(res == tcclSuccess)) return res != tcclSuccess ? res : tcclSystemError;
  bcast(&id, sizeof(id), 0);
  int rank = reversed ? worldSize() - 1 - worldRank() : worldRank();
  return tcclCommInitRank(comm, worldSize(), id, rank);
}

}  // namespace p2p
}  // namespace test
}  // namespace tccl

#endif  // TCCL_TESTS_P2P_P2P_PATTERNS_H_
