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
 * NCCL counterpart: src/graph/tuning.cc (ncclTopoTuneModel, ncclTopoGetAlgoTime, the NCCL_ALGO
 * parser), src/enqueue.cc (topoGetAlgoInfo).
 * Added in: stage 3.
 */
#ifndef TCCL_TUNING_H_
#define TCCL_TUNING_H_

#include <cstddef>
#include <string>

#include "algo_mask.h"
#include "core.h"
#include "device/work.h"

namespace tccl {

struct CommContext;

/// "ring", "tree", "recdoubling".
const char* algoName(Algo algo);

/// The row of a collective in the masks (algo_mask.h): 0 for AllReduce ... 4 for Reduce.
int collIndex(WorkFunc f);

/// Parses a TCCL_ALGO value (empty: everything allowed). On error returns tcclInvalidArgument
/// with the reason in *why.
tcclResult_t parseAlgoList(const std::string& value, AlgoMask* out, std::string* why);

/// Reads TCCL_ALGO for a new communicator (comm->algoMask); an unknown name is an error here.
tcclResult_t tuningInit(CommContext* comm);

/// Whether `algo` has an implementation for `f` on n ranks.
bool algoSupports(WorkFunc f, Algo algo, int nranks);

/// The model's prediction, in microseconds (bytes: the call's total, as NCCL's nBytes: the
/// buffer of AllReduce/Broadcast/Reduce, nranks blocks for AllGather/ReduceScatter).
double predictTimeUs(WorkFunc f, Algo algo, int nranks, size_t bytes, bool onDevice);

/// The cheapest algorithm `mask` allows for this call, as an index (kAlgos[i] is the Algo), or
/// -1 when it allows none. `why` (may be null) receives the predictions, " ring 66.0 us tree
/// 54.0 us ...", for the TUNING log.
int chooseAlgorithm(const AlgoMask& mask, WorkFunc f, int nranks, size_t bytes, bool onDevice,
                    char* why, size_t whyBytes);

/// After the peers are known: checks that every rank has the same TCCL_ALGO, and picks the
/// model's row (device when every rank has a GPU, comm->tuneDevice).
tcclResult_t tuningCheckPeers(CommContext* comm);

/// Picks the algorithm for one call (and logs the decision under TUNING).
tcclResult_t selectAlgorithm(CommContext* comm, WorkFunc f, size_t bytes, Algo* algo);

}  // namespace tccl

#endif  // TCCL_TUNING_H_
