/*
 * check_mode.cc: the signatures, their all-gather and the verdict. See check_mode.h.
 *
 * Added in: stage 7.
 */
#include "check_mode.h"

#include <cstring>
#include <string>
#include <vector>

#include "comm_context.h"
#include "flight_recorder.h"
#include "tccl/common/param.h"

TCCL_PARAM(CheckMode, "CHECK_MODE", 0)

namespace tccl {

namespace {

/// One collective as every rank must have called it (fixed layout: it goes on the wire).
struct CollSignature {
  uint8_t func;   // WorkFunc
  uint8_t dtype;  // tcclDataType_t
  uint8_t redop;  // DevRedOp, 0xff when the collective does not reduce
  uint8_t pad;
  int32_t root;   // -1 when it has none
  uint64_t count;
  bool operator==(const CollSignature& o) const { return memcmp(this, &o, sizeof o) == 0; }
};
static_assert(sizeof(CollSignature) == 16, "a wire format");

/// What each rank sends first: how many collectives, and a digest of their signatures.
struct GroupSummary {
  uint64_t nColls;
  uint64_t digest;  // FNV-1a of the signatures
};

std::string describe(const CollSignature& s) {
  return frCallWords(s.func, s.count, s.dtype, s.redop == 0xff ? -1 : s.redop, s.root);
}

CollSignature signatureOf(const CollTask& c) {
  CollSignature s{};
  s.func = uint8_t(c.func);
  s.dtype = uint8_t(c.dtype);
  s.redop = frCollReduces(s.func) ? uint8_t(c.op.op) : 0xff;
  s.root = frCollRooted(s.func) ? c.root : -1;
  s.count = c.count;
  return s;
}

uint64_t fnv1a(const void* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

bool checkModeEnabled() { return tcclParamCheckMode() != 0; }

tcclResult_t checkModeCompare(const CommTasks& t, uint64_t firstSeq) {
  const CommContext* comm = &commContext(t.comm);
  if (comm->nranks == 1) return tcclSuccess;
  std::vector<CollSignature> mine;
  for (const CollTask& c : t.colls) mine.push_back(signatureOf(c));
  // 1. Counts and digests: one small all-gather, the whole cost when all agree.
  std::vector<GroupSummary> all(size_t(comm->nranks));
  all[size_t(comm->rank)] = GroupSummary{mine.size(), fnv1a(mine.data(), mine.size() * sizeof(CollSignature))};
  TCCL_CHECK(comm->bootstrap->allGather(all.data(), sizeof(GroupSummary)));
  bool same = true;
  uint64_t most = 0;
  for (const GroupSummary& g : all) {
    same = same && g.nColls == all[0].nColls && g.digest == all[0].digest;
    most = std::max(most, g.nColls);
  }
  if (same) return tcclSuccess;
  // 2. They differ: every rank's whole list (padded to the longest), to say how. Every rank
  // takes this branch (they all saw the same summaries), so the all-gather is collective.
  const size_t slots = size_t(most) + 1;  // (+1: a slot past a shorter list stays zero)
  std::vector<CollSignature> lists(slots * size_t(comm->nranks));
  std::copy(mine.begin(), mine.end(), lists.begin() + ptrdiff_t(slots) * comm->rank);
  TCCL_CHECK(comm->bootstrap->allGather(lists.data(), slots * sizeof(CollSignature)));
  // >>> exercise 7.1: the first collective that differs, in words
  for (size_t i = 0; i < most; i++) {
    for (int r = 1; r < comm->nranks; r++) {
      const bool has0 = i < all[0].nColls, hasR = i < all[size_t(r)].nColls;
      const CollSignature& a = lists[i];
      const CollSignature& b = lists[slots * size_t(r) + i];
      if (has0 == hasR && (!has0 || a == b)) continue;
      TCCL_WARN("check mode: the ranks' calls differ at collective %lu: rank 0 called %s, "
                "rank %d called %s (TCCL_CHECK_MODE=1: no rank runs this group)",
                (unsigned long)(firstSeq + i), has0 ? describe(a).c_str() : "nothing", r,
                hasR ? describe(b).c_str() : "nothing");
      return tcclInvalidUsage;
    }
  }
  TCCL_WARN("check mode: the ranks' collectives differ (digest) but no difference was found");
  return tcclInternalError;
  // <<< exercise 7.1
}

}  // namespace tccl
