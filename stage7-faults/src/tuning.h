/*
 * tuning.h: choosing an algorithm per collective -- the cost model and TCCL_ALGO.
 *
 * What it is: NCCL's tuning, for tccl's algorithms. For each collective call, every algorithm
 * that can run it and that TCCL_ALGO allows gets a predicted time
 *
 *     time = base + hops(coll, algo, n) * hop + wire(coll, algo, n) * bytes / bw
 *
 * (base: what a call costs before any byte moves; hop: one message's latency on the transport,
 * paid once per step the algorithm runs in sequence; wire: how many times each rank's share of
 * the bytes crosses its link; bw: one link's bandwidth), and the cheapest one runs. The
 * constants are measured (tools/bench/tune.sh) and kept in one table in tuning.cc with the
 * date and the machine they came from; TCCL_DEBUG_SUBSYS=TUNING logs every decision with the
 * predicted times.
 *
 * TCCL_ALGO takes NCCL's syntax: a comma-separated list of algorithms to allow ("ring,tree"),
 * or to exclude after a leading ^ ("^tree"), optionally per collective
 * ("allreduce:tree;broadcast:ring"; collectives not named keep every algorithm). Names are
 * case-insensitive; an unknown one fails tcclCommInitRank with a message naming it. NCCL's
 * other algorithm names (collnetdirect, nvls, pat, ...) are recognised and never chosen.
 *
 * Invariants: every rank makes the same choice for the same call (the inputs are the call,
 * nranks, TCCL_ALGO -- checked equal on every rank at init -- and whether every rank has a GPU),
 * since all ranks must run the same algorithm; a call for
 * which TCCL_ALGO leaves no algorithm fails with tcclInvalidUsage instead of falling back.
 *
 * Stage 5: each call also gets a protocol, Simple, LL (device/prims_ll.h) or LL128
 * (device/prims_ll128.h, NVLink only), chosen by the same model from a row of constants per
 * protocol; TCCL_PROTO ("ll", "^ll128", "allreduce:simple", ...) restricts the protocols as
 * TCCL_ALGO does the algorithms, and must agree on every rank too.
 *
 * NCCL counterpart: src/graph/tuning.cc (ncclTopoTuneModel, ncclTopoGetAlgoTime, the NCCL_ALGO
 * and NCCL_PROTO parsers), src/enqueue.cc (topoGetAlgoInfo).
 * Added in: stage 3; protocols in stage 5.
 */
#ifndef TCCL_TUNING_H_
#define TCCL_TUNING_H_

#include <cstddef>
#include <string>

#include "algo_mask.h"
#include "core.h"
#include "device/work.h"

// Stage 5: a message of at most this many bytes goes by the LL protocol when the communicator
// has it (comm->llAvailable), as NCCL_P2P_LL_THRESHOLD (NCCL's default is 16 KiB; here LL is
// still faster at 32 KiB and slower at 128 KiB: chapter 5, "Choosing the protocol"); 0 turns
// LL off for send/recv. Both ends see the same byte count, so they choose alike. (TCCL_PROTO
// governs collectives only, as NCCL_PROTO does.) Every rank must use the same value (checked
// at init).
TCCL_PARAM(P2pLLThreshold, "P2P_LL_THRESHOLD", 32768)
// Stage 5: the most parts (channels) a large device-buffer send/recv is cut into, as
// NCCL_MAX_P2P_NCHANNELS; 0: the bound plan_p2p.cc computes. Every rank must use the same
// value (checked at init): it decides how both ends cut a message.
TCCL_PARAM(MaxP2pNChannels, "MAX_P2P_NCHANNELS", 0)

namespace tccl {

struct CommContext;

/// "ring", "tree", "recdoubling".
const char* algoName(Algo algo);

/// The row of a collective in the masks (algo_mask.h): 0 for AllReduce ... 4 for Reduce.
int collIndex(WorkFunc f);

/// "simple", "ll", "ll128".
const char* protoName(WorkProto proto);

/// Parses a TCCL_ALGO value (empty: everything allowed). On error returns tcclInvalidArgument
/// with the reason in *why.
tcclResult_t parseAlgoList(const std::string& value, AlgoMask* out, std::string* why);

/// Parses a TCCL_PROTO value, TCCL_ALGO's grammar with simple, ll and ll128. Stage 5.
tcclResult_t parseProtoList(const std::string& value, ProtoMask* out, std::string* why);

/// Reads TCCL_ALGO (and, stage 5, TCCL_PROTO) for a new communicator (comm->algoMask,
/// comm->protoMask); an unknown name is an error here.
tcclResult_t tuningInit(CommContext* comm);

/// Whether `algo` has an implementation for `f` on n ranks.
bool algoSupports(WorkFunc f, Algo algo, int nranks);

/// Stage 5: whether `algo` runs on `proto` (LL: ring and recursive doubling, in kernels,
/// when llAvailable; LL128: the ring, in kernels, when the caller allows it).
bool protoSupports(Algo algo, WorkProto proto, bool llAvailable);

/// The model's prediction, in microseconds (bytes: the call's total, as NCCL's nBytes: the
/// buffer of AllReduce/Broadcast/Reduce, nranks blocks for AllGather/ReduceScatter), for the
/// Simple protocol, or (stage 5) for `proto`.
double predictTimeUs(WorkFunc f, Algo algo, int nranks, size_t bytes, bool onDevice);
double predictTimeUs(WorkFunc f, Algo algo, WorkProto proto, int nranks, size_t bytes,
                     bool onDevice);

/// The cheapest algorithm `mask` allows for this call, as an index (kAlgos[i] is the Algo), or
/// -1 when it allows none. `why` (may be null) receives the predictions, " ring 66.0 us tree
/// 54.0 us ...", for the TUNING log. The first form chooses among Simple algorithms; the
/// second (stage 5) among (algorithm, protocol) pairs, LL included when llAvailable, and
/// returns the protocol in *proto.
int chooseAlgorithm(const AlgoMask& mask, WorkFunc f, int nranks, size_t bytes, bool onDevice,
                    char* why, size_t whyBytes);
int chooseAlgorithm(const AlgoMask& mask, const ProtoMask& protos, WorkFunc f, int nranks,
                    size_t bytes, bool onDevice, bool llAvailable, WorkProto* proto, char* why,
                    size_t whyBytes);

/// After the peers are known: checks that every rank has the same TCCL_ALGO (and TCCL_PROTO),
/// and picks the model's row (device when every rank has a GPU, comm->tuneDevice); stage 5:
/// LL is available when, moreover, every rank's kernels reach every peer over P2P or SHM
/// (comm->llAvailable; llReach: this rank's do), and LL128 when every rank's kernels reach
/// every peer over P2P on NVLink and every GPU has one architecture, Volta or later
/// (comm->ll128Available; ll128Arch: this rank's GPU's compute capability, major * 10 +
/// minor, when its kernels reach every peer so, else 0).
tcclResult_t tuningCheckPeers(CommContext* comm, bool llReach, int ll128Arch);

/// Picks the algorithm and (stage 5) the protocol for one call, whose buffers are on the
/// device or not (and logs the decision under TUNING).
tcclResult_t selectAlgorithm(CommContext* comm, WorkFunc f, size_t bytes, bool onDevice,
                             Algo* algo, WorkProto* proto);

}  // namespace tccl

#endif  // TCCL_TUNING_H_
