/*
 * group.cc: tcclGroupStart / tcclGroupEnd and the per-thread group state. See group.h.
 *
 * Added in: stage 1.
 */
#include "group.h"

#include <string>


namespace tccl {

namespace {

struct GroupState {
  int depth = 0;
  tcclResult_t error = tcclSuccess;
  std::vector<CommTasks> comms;
  // Stage 5: the task lists of earlier groups, emptied, their memory kept: every call outside
  // a group is a group of one, and allocating its lists anew each time would be a sizeable
  // share of a small call's host time over SHM (chapter 5, "Measured").
  std::vector<CommTasks> spare;
};

thread_local GroupState group;

CommTasks& tasksFor(tcclComm* comm) {
  for (auto& t : group.comms) {
    if (t.comm == comm) return t;
  }
  if (group.spare.empty()) {
    group.comms.emplace_back();
  } else {
    group.comms.push_back(std::move(group.spare.back()));
    group.spare.pop_back();
  }
  group.comms.back().comm = comm;
  return group.comms.back();
}

}  // namespace

void groupSetError(tcclResult_t err) {
  if (group.depth > 0 && group.error == tcclSuccess) group.error = err;
}

bool groupHasTasksFor(const tcclComm* comm) {
  for (auto& t : group.comms) {
    if (t.comm == comm) return true;
  }
  return false;
}

/// Adds a task to `comm`'s list in the current group, opening and closing a group of one when
/// the caller has none open.
template <typename Task>
static tcclResult_t enqueue(tcclComm* comm, const Task& task, cudaStream_t stream,
                            std::vector<Task> CommTasks::*list) {
  const bool implicit = group.depth == 0;
  if (implicit) TCCL_CHECK(tcclGroupStart());
  CommTasks& t = tasksFor(comm);
  if (t.empty()) {
    t.stream = stream;
  } else if (t.stream != stream) {
    TCCL_WARN("all operations of one communicator inside a group must use the same stream");
    groupSetError(tcclInvalidUsage);
    if (implicit) tcclGroupEnd();
    return tcclInvalidUsage;
  }
  (t.*list).push_back(task);
  if (implicit) return tcclGroupEnd();
  return tcclSuccess;
}

tcclResult_t groupEnqueueP2p(tcclComm* comm, const P2pTask& task, cudaStream_t stream) {
  return enqueue(comm, task, stream, &CommTasks::p2p);
}

tcclResult_t groupEnqueueColl(tcclComm* comm, const CollTask& task, cudaStream_t stream) {
  return enqueue(comm, task, stream, &CommTasks::colls);
}

}  // namespace tccl

using namespace tccl;

extern "C" tcclResult_t tcclGroupStart() {
  group.depth++;
  return tcclSuccess;
}

extern "C" tcclResult_t tcclGroupEnd() {
  if (group.depth == 0) {
    TCCL_WARN("tcclGroupEnd called without a matching tcclGroupStart");
    return tcclInvalidUsage;
  }
  if (--group.depth > 0) return tcclSuccess;  // only the outermost end launches
  std::vector<CommTasks> comms;
  comms.swap(group.comms);
  tcclResult_t err = group.error;
  group.error = tcclSuccess;
  if (err != tcclSuccess) {
    // Keep the original reason in the message: it is what the user needs to see.
    std::string why = lastError();
    TCCL_WARN("group not launched because an operation inside it failed: %s", why.c_str());
    return err;
  }
  tcclResult_t res = groupLaunch(comms);
  // Stage 5: the lists go back, empty, for the next group to fill.
  for (CommTasks& t : comms) {
    t.p2p.clear();
    t.colls.clear();
    group.spare.push_back(std::move(t));
  }
  comms.clear();
  if (group.comms.empty()) group.comms.swap(comms);
  return res;
}
