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

#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "core.h"
#include "device/work.h"
#include "group.h"
#include "transport.h"

namespace tccl {

struct CommContext;

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
  std::vector<WorkStatus> status;  // one per item, from the host executors (kernels: devStatus)
  bool started = false;
};

/// The plan of one communicator.
struct CommPlan {
  CommTasks* tasks = nullptr;
  bool onDevice = false;
  std::vector<Phase> phases;
};

/// Appends an item to `phase` that runs `elems` over connectors `send` and `recv` (either may
/// be null). Fails with a message when the batch is full.
tcclResult_t addItem(Phase& phase, WorkKind kind, int peer, int channel, Connector* send,
                     Connector* recv, const std::vector<WorkElem>& elems);

/// Appends an item whose connections go in the batch's conns table, in `conns`' order, and
/// which runs elems [elemStart, elemStart + elemCount) of the batch (stage 3).
tcclResult_t addTableItem(Phase& phase, WorkKind kind, int peer, int channel,
                          const std::vector<Connector*>& conns, int elemStart, int elemCount);

/// The WorkElem of a collective call: buffers, count, type and resolved reduction; the caller
/// sets nChannels (plan_ring.cc).
tcclResult_t makeCollElem(const CollTask& t, bool onDevice, WorkElem* e);

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
