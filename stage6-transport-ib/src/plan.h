/*
 * plan.h: a communicator's plan for one group -- phases of work batches.
 *
 * What it is: the data structure between the planner (which turns a group's tasks into work)
 * and the launcher (group_launch.cc). A plan is a list of phases, each a WorkBatch that runs to
 * completion before the next starts; a phase remembers which connector each of its items uses
 * so the launcher can connect what is missing and then point the items at the FIFOs.
 *
 * Invariants: every rank builds the same phases in the same order from matching calls, so the
 * two ends of a connector see the same sequence of messages across phases.
 *
 * NCCL counterpart: src/include/enqueue.h, struct ncclKernelPlan.
 * Added in: stage 1; the conns table in stage 3.
 */
#ifndef TCCL_PLAN_H_
#define TCCL_PLAN_H_

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "core.h"
#include "device/work.h"
#include "group.h"
#include "transport.h"

namespace tccl {

struct CommContext;

/// A rank's copy to itself on the GPU (stage 5): a one-rank collective, or a send to oneself
/// matched with a receive from oneself. The GPU executor hands a large one to the copy engine
/// (cudaMemcpyAsync), which copies at the device's full rate, where a thread block does not,
/// and a small one to a copy kernel, whose launch costs the host less (executor_gpu.cu).
struct DeviceCopy {
  const void* src;
  void* dst;
  size_t bytes;
};

/// Stage 5: the thread blocks of p2p work one GPU runs at once, shared by the ranks on it.
/// Every block of a kernel must be resident together (a send block spins until its peer's
/// receive block drains the FIFO, and a block that never gets an SM never does); tccl's
/// 512-thread blocks take an SM each (they use more than 64 registers a thread), and an H100
/// SXM has 132 SMs. plan_p2p.cc sizes the parts of large messages from this number (the
/// same on every rank); the launcher caps a p2p kernel at the rank's share of what its GPU
/// really holds (executor_gpu.cu, residentBlocks), and a batch with more items than blocks runs
/// them in turns (device/kernel_entry.cuh).
constexpr int kP2pBlockBudget = 128;

/// Stage 5: a p2p item's place in the order every rank gives its p2p items (plan_p2p.cc):
/// the pair of ranks (lower, higher), the channel, then the direction whose sender is the
/// lower rank. One rank sorting its items by this key sorts them by peer, and that is one
/// order of all pairs {a, b} that every rank shares. So when a rank has fewer blocks than
/// items and each block runs its items in this order, the first unfinished item in it heads
/// a block on both of its ranks (everything before it is done) and runs: by induction, all
/// do (tests/shm/p2p_order_test.cc simulates it).
using P2pOrderKey = std::tuple<int, int, int, int>;
inline P2pOrderKey p2pOrderKey(int rank, int peer, int channel, bool isSend) {
  const int lo = std::min(rank, peer), hi = std::max(rank, peer);
  const int sender = isSend ? rank : peer;
  return {lo, hi, channel, sender == lo ? 0 : 1};
}

/// One phase of a communicator's plan: a batch and the connectors its items use.
struct Phase {
  /// Zeroes the batch's header only. The arrays are written as items are added (addItem
  /// zeroes each item it takes); zeroing all of them (18 KB in stage 3) on every call would
  /// spend a small call's host time on bytes nobody reads (chapter 3, "Where a small call's
  /// time goes").
  Phase() { std::memset(static_cast<void*>(&batch), 0, offsetof(WorkBatch, items)); }
  WorkBatch batch;
  std::vector<std::pair<int, Connector*>> itemConns;  // item index -> connector (null: none)
  // Stage 3: multi-peer items (trees, recursive doubling) keep their connections in the
  // batch's conns table: table index -> connector (null: no peer in that slot).
  std::vector<std::pair<int, Connector*>> tableConns;
  int nConns = 0;  // entries of batch.conns used
  std::vector<DeviceCopy> deviceCopies;  // run before the batch's kernel (stage 5)
  std::vector<WorkStatus> status;  // one per item, from the host executors (kernels: devStatus)
  bool started = false;
};

/// The plan of one communicator.
struct CommPlan {
  CommTasks* tasks = nullptr;
  bool onDevice = false;
  bool capturing = false;  // device work on a stream being captured into a CUDA graph (stage 5)
  std::vector<Phase> phases;
};

/// Stage 5: the plan of a communicator's last group of one collective on host buffers, kept
/// for the next call of the same shape (plan_cache.cc).
struct PlanCache {
  CollTask shape;  // the call; its buffers are written into the plan's elems at each reuse
  CommPlan plan;
};

/// Stage 5: runs `tasks` (a group on one communicator) with the kept plan when it has the
/// kept shape; *result is then the call's result. False: not such a call, plan it.
bool planCacheRun(CommTasks& tasks, tcclResult_t* result);
/// Stage 5: keeps `plan` (just run, successfully) when `tasks` may be reused; takes its phases.
void planCacheKeep(CommTasks& tasks, CommPlan& plan);
/// Step 4 of tcclGroupEnd (group_launch.cc): runs the `n` communicators' plans phase by phase
/// (stage 5: also the kept plan, plan_cache.cc).
tcclResult_t runPlans(CommTasks* comms, CommPlan* plans, size_t n);

/// Appends an item to `phase` that runs `elems` over connectors `send` and `recv` (either may
/// be null). Fails with a message when the batch is full.
tcclResult_t addItem(Phase& phase, WorkKind kind, int peer, int channel, Connector* send,
                     Connector* recv, const std::vector<WorkElem>& elems);

/// The same for elems already in the batch: [elemStart, elemStart + elemCount), which several
/// items may share (a p2p operation's parts, one item per channel: stage 5).
tcclResult_t addRangeItem(Phase& phase, WorkKind kind, int peer, int channel, Connector* send,
                          Connector* recv, int elemStart, int elemCount);
/// Logs that a group does not fit one batch; returns tcclInvalidUsage.
tcclResult_t groupTooLarge();
/// Appends an item whose connections go in the batch's conns table, in `conns`' order, and
/// which runs elems [elemStart, elemStart + elemCount) of the batch (stage 3).
tcclResult_t addTableItem(Phase& phase, WorkKind kind, int peer, int channel,
                          const std::vector<Connector*>& conns, int elemStart, int elemCount);

/// The WorkElem of a collective call: buffers, count, type and resolved reduction; the caller
/// sets nChannels (plan_ring.cc).
tcclResult_t makeCollElem(const CollTask& t, bool onDevice, WorkElem* e);

/// A one-rank collective whose result is its input: every reduction but a premultiplied sum
/// (a sum divided by one rank is the sum). Then the GPU copies (plan_ring.cc; stage 5).
bool oneRankIsCopy(const WorkElem& e);
/// Stage 5: a one-rank collective alone in its group whose result is a copy of its input: in
/// place nothing at all, else (on device buffers) the copy, launched at once, without a plan
/// (group_launch.cc). *done is
/// false when it is not such a call; the caller then takes the planner's way.
tcclResult_t launchOneRankColl(tcclComm* comm, const CollTask& t, cudaStream_t stream, bool* done);

/// The planners read the communicator's context and take the connectors they use from its
/// table (creating them there on first use; group_launch.cc connects the new ones).
/// The p2p phase (plan_p2p.cc).
tcclResult_t planP2p(const CommContext* comm, ConnectorTable& connectors, CommPlan& plan);
/// The collectives phase, on rings (plan_ring.cc, stage 2). Runs before the p2p phase.
tcclResult_t planRing(const CommContext* comm, ConnectorTable& connectors, CommPlan& plan);
/// The tree and recursive-doubling phase (plan_tree.cc, stage 3). Runs after the ring phase.
tcclResult_t planTree(const CommContext* comm, ConnectorTable& connectors, CommPlan& plan);

}  // namespace tccl

#endif  // TCCL_PLAN_H_
