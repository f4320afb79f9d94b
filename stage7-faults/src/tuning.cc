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
 * Stage 5 adds a protocol to each choice: Simple everywhere, LL (device/prims_ll.h) in kernels
 * for ring and recursive doubling, with its own row of constants; TCCL_PROTO restricts them as
 * TCCL_ALGO does the algorithms.
 *
 * Added in: stage 3; protocols in stage 5.
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
// Stage 5: the device row is measured on the GPU transports by tools/bench/tune.sh over
// tccl_perf all-reduce times with each algorithm and protocol forced (the ring on up to 32
// channels, one per 32 KiB, the tree on two, recursive doubling on one): 2026-11-29, 2 H200
// joined by NVLink, 2 ranks one per GPU and 3 and 4 ranks sharing the two GPUs under MPS,
// 8 B to 16 MiB, 50 calls per size (the data and the fit's output: docs/results/h200x2/tune/);
// median errors 3% (ring), 9% (tree), 3% (recursive doubling). The first fit, on one H100
// shared by all ranks, with one channel per 256 KiB, was {8.7, 5.0, 221.4}, {9.6, 5.4, 45.1},
// {6.2, 7.3, 19.9}.
constexpr AlgoCost kCost[2][kNumAlgos] = {
    // host: ring, tree, recdoubling
    {{0.0, 13.7, 4.692}, {0.0, 15.2, 4.353}, {0.0, 16.7, 4.139}},
    // device: ring, tree, recdoubling
    {{6.2, 5.5, 251.7}, {13.6, 4.9, 44.1}, {5.5, 6.8, 19.3}},
};

// Stage 5: the LL protocol's constants, device only (LL runs in kernels), for the algorithms
// that have it (ring, recursive doubling; the trees run Simple: gbps 0 marks "none"). The
// same run as the device row: median errors 7% (ring), 13% (recursive doubling). A hop costs
// well under half of Simple's (2.1 against 5.5 us on the ring: no fence, no tail, the reader
// polls the data itself), the bandwidth half (124 against 252 GB/s: half of every line is
// flags). The crossovers this puts between them, all-reduce on the ring: about 1.3 MiB at 2
// ranks and 3.0 MiB at 4 (measured: between 1 and 2 MiB at 2 ranks, between 2 and 4 MiB at
// 4; the first fit, {6.4, 2.8, 93.6} for the ring, put the second at 1.6 MiB, where Simple
// measured 6% slower).
constexpr AlgoCost kCostLL[kNumAlgos] = {{7.4, 2.1, 124.1}, {0.0, 0.0, 0.0}, {7.4, 3.1, 4.9}};

// Stage 5: LL128's constants (device/prims_ll128.h), the ring only (NVLink between GPUs of one
// architecture: comm->ll128Available). Measured 2026-11-29 on 2 H200 (NVLink), one rank per
// GPU, tccl_perf all-reduce with ring and LL128 forced, 32 B to 32 MiB (chapter 5, "The LL128
// protocol"): with one rank count base and hop cannot be told apart, so base is LL's and the
// hop comes from the 128-512 KiB plateau (19 us), the bandwidth from 8 to 32 MiB. The row
// is slower than LL below about 2.6 MB and than Simple above it, so the model does not
// choose LL128 on its own yet; TCCL_PROTO=LL128 runs it.
constexpr AlgoCost kCostLL128[kNumAlgos] = {{7.4, 5.0, 172.6}, {0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}};

const char* const kAlgoNames[kNumAlgos] = {"ring", "tree", "recdoubling"};
const char* const kProtoNames[kNumProtos] = {"simple", "ll", "ll128"};
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

/// How a list's names are read: ring/tree/recdoubling for TCCL_ALGO, simple/ll for TCCL_PROTO
/// (stage 5). lookup() gives a name's index, kForeign for one of NCCL's that tccl accepts and
/// never chooses, -1 for an unknown one.
constexpr int kForeign = -2;
struct ListKind {
  const char* what;  // "algorithm"
  const char* have;  // "ring, tree, recdoubling": for the error message
  int count;
  int (*lookup)(const std::string& name);
};

int lookupAlgo(const std::string& name) {
  for (int a = 0; a < kNumAlgos; a++) {
    if (strcasecmp(name.c_str(), kAlgoNames[a]) == 0) return a;
  }
  if (strcasecmp(name.c_str(), "rd") == 0) return idx(Algo::kRecDoubling);
  for (const char* f : kForeignAlgos) {
    if (strcasecmp(name.c_str(), f) == 0) return kForeign;
  }
  return -1;
}

int lookupProto(const std::string& name) {
  for (int p = 0; p < kNumProtos; p++) {
    if (strcasecmp(name.c_str(), kProtoNames[p]) == 0) return p;
  }
  return -1;
}

const ListKind kAlgoList{"algorithm", "ring, tree, recdoubling", kNumAlgos, lookupAlgo};
const ListKind kProtoList{"protocol", "simple, ll, ll128", kNumProtos, lookupProto};

/// One list ("ring,tree" or "^tree") applied to one collective's row.
tcclResult_t applyList(const ListKind& kind, const std::string& list, bool* row,
                       std::string* why) {
  std::string body = trim(list);
  const bool exclude = !body.empty() && body[0] == '^';
  if (exclude) body = body.substr(1);
  bool named[8] = {};
  for (const std::string& name : split(body, ',')) {
    if (name.empty()) {
      *why = std::string("empty ") + kind.what + " name in '" + list + "'";
      return tcclInvalidArgument;
    }
    const int found = kind.lookup(name);
    if (found == -1) {
      *why = std::string("unknown ") + kind.what + " '" + name + "' (tccl has " + kind.have + ")";
      return tcclInvalidArgument;
    }
    if (found >= 0) named[found] = true;
  }
  for (int a = 0; a < kind.count; a++) row[a] = exclude ? !named[a] : named[a];
  return tcclSuccess;
}

/// A whole value: lists, optionally per collective ("allreduce:tree;broadcast:ring").
/// rows[c] is collective c's row of kind.count entries.
tcclResult_t parseList(const ListKind& kind, const std::string& value, bool* rows, int stride,
                       std::string* why) {
  for (int c = 0; c < kNumCollFuncs; c++) {
    for (int a = 0; a < kind.count; a++) rows[c * stride + a] = true;
  }
  if (trim(value).empty()) return tcclSuccess;
  // NCCL 2.24's per-collective form: "allreduce:tree,ring;broadcast:ring". Without a ':' the
  // list applies to every collective.
  for (const std::string& section : split(value, ';')) {
    if (section.empty()) continue;
    const size_t colon = section.find(':');
    if (colon == std::string::npos) {
      for (int c = 0; c < kNumCollFuncs; c++) {
        TCCL_CHECK(applyList(kind, section, rows + c * stride, why));
      }
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
    TCCL_CHECK(applyList(kind, section.substr(colon + 1), rows + c * stride, why));
  }
  return tcclSuccess;
}

}  // namespace

const char* algoName(Algo algo) {
  const int a = idx(algo);
  return a >= 0 && a < kNumAlgos ? kAlgoNames[a] : "?";
}

int collIndex(WorkFunc f) { return int(f) - int(WorkFunc::kAllReduce); }

tcclResult_t parseAlgoList(const std::string& value, AlgoMask* out, std::string* why) {
  return parseList(kAlgoList, value, &out->allowed[0][0], kNumAlgos, why);
}

tcclResult_t parseProtoList(const std::string& value, ProtoMask* out, std::string* why) {
  return parseList(kProtoList, value, &out->allowed[0][0], kNumProtos, why);
}

tcclResult_t tuningInit(CommContext* comm) {
  const std::string value = getEnvString("TCCL_ALGO");
  std::string why;
  if (parseAlgoList(value, &comm->algoMask, &why) != tcclSuccess) {
    TCCL_WARN("TCCL_ALGO=%s: %s", value.c_str(), why.c_str());
    return tcclInvalidArgument;
  }
  if (!value.empty()) TCCL_INFO(kTuning | kEnv, "TCCL_ALGO set by environment to %s", value.c_str());
  const std::string proto = getEnvString("TCCL_PROTO");  // stage 5
  if (parseProtoList(proto, &comm->protoMask, &why) != tcclSuccess) {
    TCCL_WARN("TCCL_PROTO=%s: %s", proto.c_str(), why.c_str());
    return tcclInvalidArgument;
  }
  if (!proto.empty()) TCCL_INFO(kTuning | kEnv, "TCCL_PROTO set by environment to %s", proto.c_str());
  return tcclSuccess;
}

const char* protoName(WorkProto proto) {
  const int p = idx(proto);
  return p >= 0 && p < kNumProtos ? kProtoNames[p] : "?";
}

bool protoSupports(Algo algo, WorkProto proto, bool llAvailable) {
  return proto == WorkProto::kSimple ||
         (proto == WorkProto::kLL && llAvailable && kCostLL[idx(algo)].gbps > 0) ||
         (proto == WorkProto::kLL128 && llAvailable && kCostLL128[idx(algo)].gbps > 0);
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
  return predictTimeUs(f, algo, WorkProto::kSimple, n, bytes, onDevice);
}

double predictTimeUs(WorkFunc f, Algo algo, WorkProto proto, int n, size_t bytes, bool onDevice) {
  const int a = idx(algo);
  const AlgoCost& k = proto == WorkProto::kLL      ? kCostLL[a]
                      : proto == WorkProto::kLL128 ? kCostLL128[a]
                                                   : kCost[onDevice ? 1 : 0][a];
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
  ProtoMask simple{};
  for (auto& row : simple.allowed) row[idx(WorkProto::kSimple)] = true;
  WorkProto proto = WorkProto::kSimple;
  return chooseAlgorithm(mask, simple, f, nranks, bytes, onDevice, /*llAvailable=*/false, &proto,
                         why, whyBytes);
}

int chooseAlgorithm(const AlgoMask& mask, const ProtoMask& protos, WorkFunc f, int nranks,
                    size_t bytes, bool onDevice, bool llAvailable, WorkProto* proto, char* why,
                    size_t whyBytes) {
  const bool* allowed = mask.allowed[collIndex(f)];
  const bool* allowedProto = protos.allowed[collIndex(f)];
  *proto = WorkProto::kSimple;
  if (why != nullptr && whyBytes > 0) why[0] = '\0';
  // >>> exercise 5.1: the cheapest algorithm and protocol
  double best = INFINITY;
  int algo = -1;
  int len = 0;  // of the `why` text so far
  for (Algo a : kAlgos) {
    if (!allowed[idx(a)] || !algoSupports(f, a, nranks)) continue;
    for (WorkProto p : kProtos) {
      if (!allowedProto[idx(p)] || !protoSupports(a, p, llAvailable && onDevice)) continue;
      const double t = predictTimeUs(f, a, p, nranks, bytes, onDevice);
      if (why != nullptr && len >= 0 && size_t(len) < whyBytes) {
        len += snprintf(why + len, whyBytes - size_t(len), " %s%s%s %.1f us", kAlgoNames[idx(a)],
                        p == WorkProto::kSimple ? "" : "/", p == WorkProto::kSimple ? "" : kProtoNames[idx(p)], t);
      }
      if (t < best) best = t, algo = idx(a), *proto = p;
    }
  }
  // One rank: a local copy, whatever the name.
  if (algo >= 0 && nranks == 1) algo = idx(Algo::kRing), *proto = WorkProto::kSimple;
  return algo;
  // <<< exercise 5.1
}

tcclResult_t tuningCheckPeers(CommContext* comm, bool llReach, int ll128Arch) {
  // Every rank must choose the same algorithm for the same call, or their items would wait
  // for each other forever: TCCL_ALGO must agree, and the model's row (host or device) comes
  // from what all ranks have, not from this rank's buffers.
  struct Info {
    AlgoMask mask;
    ProtoMask protos;  // stage 5
    int32_t hasGpu;
    int32_t llReach;   // stage 5: kernels reach every peer over a transport with LL slots
    int32_t ll128Arch;  // stage 5: ... over NVLink: the GPU's compute capability, else 0
  };
  std::vector<Info> all(size_t(comm->nranks));
  Info& me = all[size_t(comm->rank)];
  memset(&me, 0, sizeof(me));
  me.mask = comm->algoMask;
  me.protos = comm->protoMask;
  me.hasGpu = comm->cudaDev >= 0;
  me.llReach = llReach;
  me.ll128Arch = ll128Arch;
  TCCL_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Info)));
  comm->tuneDevice = true;
  comm->llAvailable = true;
  comm->ll128Available = true;
  for (int r = 0; r < comm->nranks; r++) {
    if (memcmp(&all[size_t(r)].mask, &me.mask, sizeof(AlgoMask)) != 0) {
      TCCL_WARN("TCCL_ALGO differs between rank %d and rank %d: every rank must allow the same "
                "algorithms", comm->rank, r);
      return tcclInvalidUsage;
    }
    if (memcmp(&all[size_t(r)].protos, &me.protos, sizeof(ProtoMask)) != 0) {
      TCCL_WARN("TCCL_PROTO differs between rank %d and rank %d: every rank must allow the same "
                "protocols", comm->rank, r);
      return tcclInvalidUsage;
    }
    comm->tuneDevice = comm->tuneDevice && all[size_t(r)].hasGpu != 0;
    comm->llAvailable = comm->llAvailable && all[size_t(r)].llReach != 0;
    // LL128 trusts a 128-byte line to land at once: NVLink between GPUs of one architecture
    // (Volta or later), as NCCL requires (its tuning.cc); anything else could tear a line.
    comm->ll128Available = comm->ll128Available && all[size_t(r)].ll128Arch == me.ll128Arch &&
                           me.ll128Arch >= 70;
  }
  comm->llAvailable = comm->llAvailable && comm->tuneDevice;
  comm->ll128Available = comm->ll128Available && comm->llAvailable && comm->nranks > 1;
  TCCL_INFO(kTuning, "LL protocol %s", comm->llAvailable ? "available (kernels reach every peer "
            "over P2P or SHM)" : "not available (host buffers only, or a peer over the network)");
  TCCL_INFO(kTuning, "LL128 protocol %s", comm->ll128Available ? "available (NVLink to every peer, "
            "one GPU architecture)" : "not available (a peer not over NVLink, on this GPU, or of "
            "another architecture)");
  return tcclSuccess;
}

tcclResult_t selectAlgorithm(CommContext* comm, WorkFunc f, size_t bytes, bool onDevice,
                             Algo* algo, WorkProto* proto) {
  const bool tuneDevice = comm->tuneDevice;
  // The log line costs a few formatted numbers: build it only when TUNING is on.
  char line[320];
  const bool logging = logEnabled(LogLevel::kInfo, kTuning);
  // LL only for a call on device buffers (stage 5): host buffers run on host executors. A
  // call of no bytes moves nothing on any protocol: TCCL_PROTO does not refuse it (its buffers
  // may be null, which classify as host memory).
  static const ProtoMask kEveryProto = [] {
    ProtoMask m{};
    for (auto& row : m.allowed) row[idx(WorkProto::kSimple)] = row[idx(WorkProto::kLL)] = true;
    return m;
  }();
  // LL128 only where every link carries its lines whole (tuningCheckPeers).
  ProtoMask protos = bytes == 0 ? kEveryProto : comm->protoMask;
  if (!comm->ll128Available) {
    for (auto& row : protos.allowed) row[idx(WorkProto::kLL128)] = false;
  }
  const int chosen =
      chooseAlgorithm(comm->algoMask, protos, f, comm->nranks,
                      bytes, tuneDevice, comm->llAvailable && onDevice, proto,
                      logging ? line : nullptr, sizeof(line));
  if (chosen < 0) {
    const std::string protos = getEnvString("TCCL_PROTO");
    if (!protos.empty()) {
      // Stage 5: TCCL_PROTO may leave only LL or LL128, which this call cannot use.
      TCCL_WARN("%s: TCCL_ALGO=%s TCCL_PROTO=%s leave no algorithm and protocol for it (LL runs "
                "only on device buffers, in kernels over P2P or SHM, with ring or recdoubling; "
                "LL128 only on device buffers over NVLink between GPUs of one architecture, with "
                "ring; everything runs Simple)", kCollTitles[collIndex(f)],
                getEnvString("TCCL_ALGO").c_str(), protos.c_str());
      return tcclInvalidUsage;
    }
    TCCL_WARN("%s: TCCL_ALGO=%s leaves no algorithm for it (it runs on ring%s)",
              kCollTitles[collIndex(f)], getEnvString("TCCL_ALGO").c_str(),
              f == WorkFunc::kAllReduce ? ", tree or recdoubling"
              : (f == WorkFunc::kBroadcast || f == WorkFunc::kReduce) ? " or tree" : " only");
    return tcclInvalidUsage;
  }
  *algo = kAlgos[chosen];
  if (logging) {
    TCCL_INFO(kTuning, "%s %zu bytes %d ranks %s:%s -> %s/%s", kCollTitles[collIndex(f)], bytes,
              comm->nranks, tuneDevice ? "device" : "host", line, kAlgoNames[chosen],
              kProtoNames[idx(*proto)]);
  }
  return tcclSuccess;
}

}  // namespace tccl
