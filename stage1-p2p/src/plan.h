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
 * Added in: stage 1.
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

/// The planners read the communicator's context and take the connectors they use from its
/// table (creating them there on first use; group_launch.cc connects the new ones).
/// The p2p phase (plan_p2p.cc).
tcclResult_t planP2p(const CommContext* comm, ConnectorTable& connectors, CommPlan& plan);

}  // namespace tccl

#endif  // TCCL_PLAN_H_
