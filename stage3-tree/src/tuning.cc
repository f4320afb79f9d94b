/*
 * tuning.cc: the cost model's table, TCCL_ALGO, and the choice per call. See tuning.h.
 *
 * Reading the model. Per step that an algorithm must run after the previous one (a "hop"),
 * every message pays the transport's latency; per byte, each rank's link carries `wire` times
 * its share. For n ranks and S bytes:
 *
 *   collective   algorithm     hops                      wire (x S)
 *   AllReduce    ring          2(n-1)                    2(n-1)/n
 *   AllReduce    tree          2 depth (ceil(log2 n))    2 (1 at n = 2); pipelined, the hops overlap
 *   AllReduce    recdoubling   log2 p (+2 when n != p)   log2 p (+2): each step moves all of S
 *   Broadcast,   ring          n-1 (a chain)             1
 *   Reduce       tree          depth                     2    (an inner node feeds 2 children)
 *   AllGather,   ring          n-1                       (n-1)/n
 *   ReduceScatter
 *
 * (p: the largest power of two <= n.) Rings win on bandwidth, recursive doubling on latency
 * (fewest hops, most bytes), trees sit between. The crossovers move with the constants, which
 * is why they are measured rather than guessed.
 *
 * Added in: stage 3.
 */
#include "tuning.h"

#include <strings.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "comm_context.h"

namespace tccl {

namespace {

/// One transport's constants for one algorithm.
struct AlgoCost {
  double baseUs;  // per call
  double hopUs;   // per sequential step
  double gbps;    // one link, one direction (GB/s = 1000 bytes per us)
};

// The measured constants: tools/bench/tune.sh prints these rows (a least-squares fit, in
// relative error, of tccl_perf all-reduce times with each algorithm forced; 8 B to 16 MiB).
//   host:   2026-11-26, "vm": the 2-core CI-class VM (Debian 12, loopback TCP), host buffers,
//           2, 4 and 5 ranks, medians of 5, after the latency work (one send and one receive
//           system call per small step, a lone item without a fiber, waiters that yield when
//           ranks outnumber cores). 4 and 5 ranks oversubscribe the 2 cores: their hops cost
//           two to three times a 2-rank hop, which no single `hop` fits well (median error
//           38-53%; the fit's choices are within 10% of the best algorithm at 29 of the 33
//           measured points, and within 1.5x at all)
//   device: 2026-11-25, "vm": the H100 machine (16 cores), one GPU shared by 2 and 3 ranks
//           under MPS, device buffers over the socket transport and the proxy (stage 5 brings
//           the GPU transports), 8 B to 2 MiB, medians of 2; median error 4-10%
// Both after the socket read-ahead and the one-tree small all-reduce (plan_tree.cc; the device
// run had its first threshold, 16 KiB, the host run today's 64 KiB). The tree's line stands
// for both of its forms: below the threshold one unpipelined tree (an inner node sends about
// 3 S), above it the double tree; a small message's time is its hops either way.
// Index: [device][algo]; the device row applies when every rank of the communicator has a
// GPU (a fact all ranks share, so they all choose alike), the host row otherwise.
constexpr AlgoCost kCost[2][kNumAlgos] = {
    // host: ring, tree, recdoubling
    {{0.0, 13.7, 4.692}, {0.0, 15.2, 4.353}, {0.0, 16.7, 4.139}},
    // device: ring, tree, recdoubling
    {{86.6, 17.6, 1.365}, {52.3, 31.4, 1.604}, {34.6, 47.2, 1.567}},
};

const char* const kAlgoNames[kNumAlgos] = {"ring", "tree", "recdoubling"};
// NCCL's algorithms that tccl does not have: accepted in TCCL_ALGO / NCCL_ALGO (a list written
// for NCCL keeps working) and never chosen.
const char* const kForeignAlgos[] = {"collnetdirect", "collnetchain", "collnet", "nvls",
                                     "nvlstree", "pat"};
const char* const kCollNames[kNumCollFuncs] = {"allreduce", "allgather", "reducescatter",
                                               "broadcast", "reduce"};
const char* const kCollTitles[kNumCollFuncs] = {"AllReduce", "AllGather", "ReduceScatter",
                                                "Broadcast", "Reduce"};

int log2Floor(int n) {
  int k = 0;
  while ((2 << k) <= n) k++;
  return k;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.push_back(trim(s.substr(start, pos == std::string::npos ? pos : pos - start)));
    if (pos == std::string::npos) return out;
    start = pos + 1;
  }
}

/// One list ("ring,tree" or "^tree") applied to collective row `c`. -1: unknown name.
tcclResult_t applyList(const std::string& list, bool row[kNumAlgos], std::string* why) {
  std::string body = trim(list);
  const bool exclude = !body.empty() && body[0] == '^';
  if (exclude) body = body.substr(1);
  bool named[kNumAlgos] = {};
  for (const std::string& name : split(body, ',')) {
    if (name.empty()) {
      *why = "empty algorithm name in '" + list + "'";
      return tcclInvalidArgument;
    }
    int found = -1;
    for (int a = 0; a < kNumAlgos; a++) {
      if (strcasecmp(name.c_str(), kAlgoNames[a]) == 0) found = a;
    }
    if (found < 0 && strcasecmp(name.c_str(), "rd") == 0) found = idx(Algo::kRecDoubling);
    bool foreign = false;
    for (const char* f : kForeignAlgos) foreign |= strcasecmp(name.c_str(), f) == 0;
    if (found < 0 && !foreign) {
      *why = "unknown algorithm '" + name + "' (tccl has ring, tree, recdoubling)";
      return tcclInvalidArgument;
    }
    if (found >= 0) named[found] = true;
  }
  for (int a = 0; a < kNumAlgos; a++) row[a] = exclude ? !named[a] : named[a];
  return tcclSuccess;
}

}  // namespace

const char* algoName(Algo algo) {
  const int a = idx(algo);
  return a >= 0 && a < kNumAlgos ? kAlgoNames[a] : "?";
}

int collIndex(WorkFunc f) { return int(f) - int(WorkFunc::kAllReduce); }

tcclResult_t parseAlgoList(const std::string& value, AlgoMask* out, std::string* why) {
  for (auto& row : out->allowed) {
    for (bool& a : row) a = true;
  }
  if (trim(value).empty()) return tcclSuccess;
  // NCCL 2.24's per-collective form: "allreduce:tree,ring;broadcast:ring". Without a ':' the
  // list applies to every collective.
  for (const std::string& section : split(value, ';')) {
    if (section.empty()) continue;
    const size_t colon = section.find(':');
    if (colon == std::string::npos) {
      for (auto& row : out->allowed) TCCL_CHECK(applyList(section, row, why));
      continue;
    }
    const std::string coll = trim(section.substr(0, colon));
    int c = -1;
    for (int i = 0; i < kNumCollFuncs; i++) {
      if (strcasecmp(coll.c_str(), kCollNames[i]) == 0) c = i;
    }
    if (c < 0) {
      *why = "unknown collective '" + coll +
             "' (allreduce, allgather, reducescatter, broadcast, reduce)";
      return tcclInvalidArgument;
    }
    TCCL_CHECK(applyList(section.substr(colon + 1), out->allowed[c], why));
  }
  return tcclSuccess;
}

tcclResult_t tuningInit(CommContext* comm) {
  const std::string value = getEnvString("TCCL_ALGO");
  std::string why;
  if (parseAlgoList(value, &comm->algoMask, &why) != tcclSuccess) {
    TCCL_WARN("TCCL_ALGO=%s: %s", value.c_str(), why.c_str());
    return tcclInvalidArgument;
  }
  if (!value.empty()) TCCL_INFO(kTuning | kEnv, "TCCL_ALGO set by environment to %s", value.c_str());
  return tcclSuccess;
}

bool algoSupports(WorkFunc f, Algo algo, int nranks) {
  switch (algo) {
    case Algo::kRing:
      return true;
    case Algo::kTree:
      return f == WorkFunc::kAllReduce || f == WorkFunc::kBroadcast || f == WorkFunc::kReduce;
    case Algo::kRecDoubling:
      // Slots: the folding partner and one per step (device/rec_doubling.h).
      return f == WorkFunc::kAllReduce && 2 + 2 * log2Floor(nranks) <= kMaxWorkConns / 4;
  }
  return false;
}

double predictTimeUs(WorkFunc f, Algo algo, int n, size_t bytes, bool onDevice) {
  const AlgoCost& k = kCost[onDevice ? 1 : 0][idx(algo)];
  double hops = 0, wire = 0;
  int depth = 0;  // of NCCL's binary tree: ceil(log2 n) (trees.h)
  while ((1 << depth) < n) depth++;
  const int p = 1 << log2Floor(n);
  switch (f) {
    case WorkFunc::kAllReduce:
      if (algo == Algo::kRing) hops = 2.0 * (n - 1), wire = 2.0 * (n - 1) / n;
      // Tree: an inner node sends S/2 up and S/2 to each of two children, and as a leaf of
      // the other tree S/2 up: 2 S. With two ranks there are no inner nodes: S.
      if (algo == Algo::kTree) hops = 2.0 * depth, wire = n == 2 ? 1.0 : 2.0;
      if (algo == Algo::kRecDoubling) hops = wire = log2Floor(n) + (n != p ? 2.0 : 0.0);
      break;
    case WorkFunc::kBroadcast:
    case WorkFunc::kReduce:
      if (algo == Algo::kRing) hops = n - 1.0, wire = 1.0;
      if (algo == Algo::kTree) hops = depth, wire = 2.0;
      break;
    case WorkFunc::kAllGather:
    case WorkFunc::kReduceScatter:
      hops = n - 1.0, wire = double(n - 1) / n;
      break;
    default:
      break;
  }
  if (n == 1) hops = wire = 0;
  return k.baseUs + hops * k.hopUs + wire * double(bytes) / (k.gbps * 1e3);
}

int chooseAlgorithm(const AlgoMask& mask, WorkFunc f, int nranks, size_t bytes, bool onDevice,
                    char* why, size_t whyBytes) {
  const bool* allowed = mask.allowed[collIndex(f)];
  double best = INFINITY;
  int algo = -1;
  int len = 0;
  if (why != nullptr && whyBytes > 0) why[0] = '\0';
  for (Algo a : kAlgos) {
    if (!allowed[idx(a)] || !algoSupports(f, a, nranks)) continue;
    const double t = predictTimeUs(f, a, nranks, bytes, onDevice);
    if (why != nullptr && len >= 0 && size_t(len) < whyBytes) {
      len += snprintf(why + len, whyBytes - size_t(len), " %s %.1f us", kAlgoNames[idx(a)], t);
    }
    if (t < best) best = t, algo = idx(a);
  }
  // One rank: a local copy, whatever the name.
  if (algo >= 0 && nranks == 1) algo = idx(Algo::kRing);
  return algo;
}

tcclResult_t tuningCheckPeers(CommContext* comm) {
  // Every rank must choose the same algorithm for the same call, or their items would wait
  // for each other forever: TCCL_ALGO must agree, and the model's row (host or device) comes
  // from what all ranks have, not from this rank's buffers.
  struct Info {
    AlgoMask mask;
    int32_t hasGpu;
  };
  std::vector<Info> all(size_t(comm->nranks));
  Info& me = all[size_t(comm->rank)];
  memset(&me, 0, sizeof(me));
  me.mask = comm->algoMask;
  me.hasGpu = comm->cudaDev >= 0;
  TCCL_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Info)));
  comm->tuneDevice = true;
  for (int r = 0; r < comm->nranks; r++) {
    if (memcmp(&all[size_t(r)].mask, &me.mask, sizeof(AlgoMask)) != 0) {
      TCCL_WARN("TCCL_ALGO differs between rank %d and rank %d: every rank must allow the same "
                "algorithms", comm->rank, r);
      return tcclInvalidUsage;
    }
    comm->tuneDevice = comm->tuneDevice && all[size_t(r)].hasGpu != 0;
  }
  return tcclSuccess;
}

tcclResult_t selectAlgorithm(CommContext* comm, WorkFunc f, size_t bytes, Algo* algo) {
  const bool onDevice = comm->tuneDevice;
  // The log line costs a few formatted numbers: build it only when TUNING is on.
  char line[256];
  const bool logging = logEnabled(LogLevel::kInfo, kTuning);
  const int chosen = chooseAlgorithm(comm->algoMask, f, comm->nranks, bytes, onDevice,
                                     logging ? line : nullptr, sizeof(line));
  if (chosen < 0) {
    TCCL_WARN("%s: TCCL_ALGO=%s leaves no algorithm for it (it runs on ring%s)",
              kCollTitles[collIndex(f)], getEnvString("TCCL_ALGO").c_str(),
              f == WorkFunc::kAllReduce ? ", tree or recdoubling"
              : (f == WorkFunc::kBroadcast || f == WorkFunc::kReduce) ? " or tree" : " only");
    return tcclInvalidUsage;
  }
  *algo = kAlgos[chosen];
  if (logging) {
    TCCL_INFO(kTuning, "%s %zu bytes %d ranks %s:%s -> %s", kCollTitles[collIndex(f)], bytes,
              comm->nranks, onDevice ? "device" : "host", line, kAlgoNames[chosen]);
  }
  return tcclSuccess;
}

}  // namespace tccl
