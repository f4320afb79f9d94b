/*
 * comm_split.cc: new communicators from an existing one -- tcclCommSplit and tcclCommShrink.
 *
 * What it is: both make a new communicator of some of the parent's ranks, through the
 * parent's bootstrap, so no new unique id has to travel through MPI or a file:
 *  - Split (every rank of the parent calls it): the ranks all-gather (color, key); the ranks
 *    of one color, ordered by key then by parent rank, form a communicator. The first of each
 *    color starts a bootstrap root and the ids are all-gathered too; each member then joins
 *    with its new rank. Color TCCL_SPLIT_NOCOLOR joins nothing (*newcomm = NULL) but still
 *    takes part in the exchange (the others wait for its answer).
 *  - Shrink (every rank of the parent but the excluded ones calls it): the survivors keep
 *    their order; the first of them starts a root and sends its id to each other survivor,
 *    point to point. Nothing is sent to, or awaited from, an excluded rank: they may be dead.
 *    With TCCL_SHRINK_ABORT the parent is first revoked (comm_finalize.cc): operations still
 *    waiting for the dead ranks stop.
 *
 * Invariants: the new communicator's rank i is the i-th member in the order above on every
 * member (they compute it from the same exchanged data); the parent stays usable after a split
 * (and after a shrink without the abort flag); its bootstrap tags for these exchanges count
 * the parent's splits (`splits`), the same on every member; with config NULL the new
 * communicator takes the parent's configuration; when that is non-blocking, the whole call is a
 * job (async_job.h) and both communicators say tcclInProgress until it ends.
 *
 * NCCL counterpart: src/init.cc (ncclCommSplit, ncclCommShrink, commGetSplitInfo).
 * Added in: stage 7.
 */
#include <algorithm>
#include <cstring>
#include <vector>

#include "async_job.h"
#include "comm.h"
#include "cuda_wrap.h"

namespace tccl {

namespace {

// Bootstrap tags of the point-to-point ids of tcclCommShrink: base + the parent's split count
// (the connection setup's tags are far below, transport.cc).
constexpr uint32_t kShrinkTagBase = 0x5b000000u;

struct SplitInfo {
  int32_t color;
  int32_t key;
};

struct IdBytes {
  char b[kUniqueIdBytes];
};

/// Makes the child once its rank and size are known (joins the child's other ranks).
tcclResult_t joinChild(tcclComm* child, int rank, int nranks, const IdBytes& id) {
  child->rank = rank;
  child->nranks = nranks;
  return commSetup(child, id.b);
}

tcclResult_t splitWork(tcclComm* parent, int color, int key, tcclComm* child) {
  const int n = parent->nranks;
  std::vector<SplitInfo> all(size_t(n), SplitInfo{0, 0});
  all[size_t(parent->rank)] = SplitInfo{color, key};
  TCCL_CHECK(parent->bootstrap->allGather(all.data(), sizeof(SplitInfo)));
  std::vector<int> members;
  for (int r = 0; r < n; r++) {
    if (color != TCCL_SPLIT_NOCOLOR && all[size_t(r)].color == color) members.push_back(r);
  }
  // By key; stable, so equal keys keep the parent's order.
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[size_t(a)].key < all[size_t(b)].key; });
  // The first member of each color starts its root; the others learn the id from the gather.
  std::vector<IdBytes> ids(static_cast<size_t>(n));
  memset(ids.data(), 0, ids.size() * sizeof(IdBytes));
  if (!members.empty() && members[0] == parent->rank) {
    TCCL_CHECK(bootstrapNewRoot(ids[size_t(parent->rank)].b));
  }
  TCCL_CHECK(parent->bootstrap->allGather(ids.data(), sizeof(IdBytes)));
  parent->splits++;
  if (child == nullptr) return tcclSuccess;
  const int myIndex =
      int(std::find(members.begin(), members.end(), parent->rank) - members.begin());
  TCCL_INFO(kInit, "split: color %d key %d -> rank %d of %zu", color, key, myIndex,
            members.size());
  return joinChild(child, myIndex, int(members.size()), ids[size_t(members[0])]);
}

tcclResult_t shrinkWork(tcclComm* parent, std::vector<int> survivors, bool abortFirst,
                        tcclComm* child) {
  // >>> exercise 7.2: a shrink talks to the survivors only
  if (abortFirst && !parent->revoked.load()) TCCL_CHECK(commRevokeNow(parent));
  const uint32_t tag = kShrinkTagBase + parent->splits++;
  IdBytes id;
  memset(&id, 0, sizeof id);
  const int leader = survivors[0];
  if (parent->rank == leader) {
    TCCL_CHECK(bootstrapNewRoot(id.b));
    for (size_t i = 1; i < survivors.size(); i++) {
      TCCL_CHECK(parent->bootstrap->send(survivors[i], tag, id.b, sizeof id.b));
    }
  } else {
    TCCL_CHECK(parent->bootstrap->recv(leader, tag, id.b, sizeof id.b));
  }
  const int myIndex =
      int(std::find(survivors.begin(), survivors.end(), parent->rank) - survivors.begin());
  TCCL_INFO(kInit, "shrink: rank %d -> rank %d of %zu", parent->rank, myIndex, survivors.size());
  return joinChild(child, myIndex, int(survivors.size()), id);
  // <<< exercise 7.2
}

/// The child's configuration (NULL: the parent's), checked as an init's is.
tcclResult_t childConfig(const char* call, const tcclComm* parent, const tcclConfig_t* config,
                         tcclConfig_t* out) {
  TCCL_CHECK(commCheckConfig(call, config));
  *out = config != nullptr ? *config : parent->config;
  return tcclSuccess;
}

/// Runs `work` for parent and child, blocking or as a job; a child that could not be made
/// (blocking) is freed and *newcomm stays NULL.
template <typename Work>
tcclResult_t runWithChild(const char* call, tcclComm* parent, const tcclConfig_t& config,
                          bool wantChild, tcclComm_t* newcomm, Work work) {
  tcclComm* child = wantChild ? commAlloc(0, -1, &config) : nullptr;
  std::vector<tcclComm*> comms{parent};
  if (child != nullptr && !child->blocking) {
    // Handed out before it works: live, so tcclCommGetAsyncError and tcclCommAbort take it.
    commRegister(child);
    comms.push_back(child);
  }
  const bool nonBlocking = child != nullptr ? !child->blocking : !parent->blocking;
  tcclResult_t res = jobRun(call, comms, nonBlocking, [=] { return work(child); });
  if (res == tcclInProgress) {
    *newcomm = child;
    return res;
  }
  if (child != nullptr && res == tcclSuccess && child->blocking) {
    commRegister(child);
    *newcomm = child;
    return res;
  }
  if (child != nullptr) {  // failed, or never started
    if (!child->blocking) (void)commClaim(child, call);
    commFree(child, true);
  }
  return res;
}

}  // namespace

}  // namespace tccl

using namespace tccl;

extern "C" tcclResult_t tcclCommSplit(tcclComm_t comm, int color, int key, tcclComm_t* newcomm,
                                      tcclConfig_t* config) {
  TCCL_CHECK(commCheckReady(comm, "tcclCommSplit"));
  setLogRank(comm->rank);
  TCCL_ARG_CHECK(newcomm != nullptr, "tcclCommSplit: newcomm is NULL");
  *newcomm = nullptr;
  TCCL_ARG_CHECK(color >= 0 || color == TCCL_SPLIT_NOCOLOR,
                 "tcclCommSplit: color %d (it must be >= 0, or TCCL_SPLIT_NOCOLOR)", color);
  tcclConfig_t cfg;
  TCCL_CHECK(childConfig("tcclCommSplit", comm, config, &cfg));
  return runWithChild("tcclCommSplit", comm, cfg, color != TCCL_SPLIT_NOCOLOR, newcomm,
                      [comm, color, key](tcclComm* child) {
                        return splitWork(comm, color, key, child);
                      });
}

extern "C" tcclResult_t tcclCommShrink(tcclComm_t comm, int* excludeRanksList,
                                       int excludeRanksCount, tcclComm_t* newcomm,
                                       tcclConfig_t* config, int shrinkFlags) {
  // A revoked parent is what shrink is for: only a job still running, or a finalized
  // parent, is refused.
  TCCL_CHECK(commCheckIdle(comm, "tcclCommShrink"));
  setLogRank(comm->rank);
  TCCL_ARG_CHECK(!comm->finalized.load(), "tcclCommShrink: the communicator was finalized");
  TCCL_ARG_CHECK(newcomm != nullptr, "tcclCommShrink: newcomm is NULL");
  *newcomm = nullptr;
  TCCL_ARG_CHECK(shrinkFlags == TCCL_SHRINK_DEFAULT || shrinkFlags == TCCL_SHRINK_ABORT,
                 "tcclCommShrink: shrinkFlags 0x%x (TCCL_SHRINK_DEFAULT or TCCL_SHRINK_ABORT)",
                 unsigned(shrinkFlags));
  TCCL_ARG_CHECK(excludeRanksCount >= 0 && excludeRanksCount < comm->nranks,
                 "tcclCommShrink: excludeRanksCount %d (it must be in [0, %d): someone stays)",
                 excludeRanksCount, comm->nranks);
  TCCL_ARG_CHECK(excludeRanksCount == 0 || excludeRanksList != nullptr,
                 "tcclCommShrink: excludeRanksList is NULL with %d ranks to exclude",
                 excludeRanksCount);
  std::vector<bool> excluded(size_t(comm->nranks), false);
  for (int i = 0; i < excludeRanksCount; i++) {
    const int r = excludeRanksList[i];
    TCCL_ARG_CHECK(r >= 0 && r < comm->nranks,
                   "tcclCommShrink: excluded rank %d is out of range [0, %d)", r, comm->nranks);
    TCCL_ARG_CHECK(!excluded[size_t(r)], "tcclCommShrink: rank %d is excluded twice", r);
    TCCL_ARG_CHECK(r != comm->rank,
                   "tcclCommShrink: rank %d excludes itself (excluded ranks do not call "
                   "tcclCommShrink)", r);
    excluded[size_t(r)] = true;
  }
  std::vector<int> survivors;
  for (int r = 0; r < comm->nranks; r++) {
    if (!excluded[size_t(r)]) survivors.push_back(r);
  }
  tcclConfig_t cfg;
  TCCL_CHECK(childConfig("tcclCommShrink", comm, config, &cfg));
  const bool abortFirst = shrinkFlags == TCCL_SHRINK_ABORT;
  return runWithChild("tcclCommShrink", comm, cfg, true, newcomm,
                      [comm, survivors, abortFirst](tcclComm* child) {
                        return shrinkWork(comm, survivors, abortFirst, child);
                      });
}
