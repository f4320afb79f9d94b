/*
 * launch_hooks.cc: the stage-7 hooks around a group's launch -- fault injection, the flight
 * recorder, the check mode -- in one place.
 *
 * What it is: groupLaunch, which tcclGroupEnd calls, is launchGroup (group_launch.cc: plan,
 * connect, run) wrapped in what chapter 7 adds:
 *
 *   1. TCCL_FAULT strikes as its operation is called (fault_inject.h), before it is recorded,
 *      so that a stalled rank's record shows when it really joined;
 *   2. every operation of the group is recorded as started (flight_recorder.h), numbered as
 *      recordOps numbers it;
 *   3. with TCCL_CHECK_MODE, a group of one communicator's collectives is compared across
 *      ranks before it runs (check_mode.h);
 *   4. launchGroup;
 *   5. each record completes: with its kernel launch (the GPU finishes it later), or now
 *      (host buffers moved, nothing to move, captured into a graph, or failed).
 *
 * Invariants: the recorder sees every operation exactly once, in issue order, whatever the
 * launch returns; nothing here changes what launchGroup plans or moves.
 *
 * NCCL counterpart: none in NCCL itself; PyTorch's Flight Recorder records around each
 * collective in ProcessGroupNCCL (the entries' fields are its).
 * Added in: stage 7.
 */
#include <atomic>
#include <vector>

#include "check_mode.h"
#include "comm_context.h"
#include "fault_inject.h"
#include "flight_recorder.h"
#include "group.h"
#include "launch_state.h"

namespace tccl {

namespace {

/// One communicator's operations of the group, as the recorder numbered them.
struct FrSpan {
  uint64_t first = 0, last = 0;
  uint64_t launches = 0;  // the communicator's launch count before the group
  bool any = false;
};

/// Records every operation of the group before it runs, as started: the call is working on
/// it. (Whether it will run on the GPU is learned afterwards, from the launch count: asking
/// CUDA where each buffer lives here too would cost a microsecond a call.)
FrSpan frRecord(CommTasks& t) {
  FrSpan span;
  const LaunchState& launch = commLaunch(t.comm);
  FlightRecorder& fr = commRecorder(t.comm);
  span.launches = launch.launches.load(std::memory_order_relaxed);
  const uint64_t now = frNowNs();
  uint64_t op = launch.opCount;  // recordOps gives the same numbers, in the same order
  auto add = [&](FrEntry& e) {
    e.opCount = op++;
    e.state = FrState::kStarted;
    e.createdNs = e.startedNs = now;
    const uint64_t id = fr.record(e);
    if (!span.any) span.first = id;
    span.last = id;
    span.any = true;
  };
  for (const CollTask& c : t.colls) {  // the collectives phase runs first (plan_ring.cc)
    FrEntry e;
    const uint8_t f = uint8_t(c.func);
    e.func = f;
    e.name = frCollName(f);
    const int64_t n = int64_t(c.count), r = commContext(t.comm).nranks;
    e.inCount = c.func == WorkFunc::kReduceScatter ? n * r : n;
    e.outCount = c.func == WorkFunc::kAllGather ? n * r : n;
    e.dtype = int(c.dtype);
    e.redop = frCollReduces(f) ? int(c.op.op) : -1;  // (DevRedOp: avg may show as premulsum)
    e.root = frCollRooted(f) ? c.root : -1;
    add(e);
  }
  for (const P2pTask& p : t.p2p) {
    FrEntry e;
    e.name = p.isSend ? "send" : "recv";
    e.inCount = e.outCount = int64_t(p.bytes);
    e.dtype = int(tcclUint8);
    e.peer = p.peer;
    add(e);
  }
  return span;
}

/// The check mode (check_mode.h), for a group of one communicator's collectives.
tcclResult_t checkGroup(std::vector<CommTasks>& comms) {
  if (comms.size() != 1) {
    static std::atomic<bool> said{false};  // (once per process: the same for every such group)
    if (!said.exchange(true)) {
      TCCL_INFO(kColl, "check mode: groups over several communicators are not checked (one "
                       "thread drives them: an out-of-band exchange would deadlock)");
    }
    return tcclSuccess;
  }
  const CommTasks& t = comms[0];
  if (t.colls.empty()) return tcclSuccess;
  return checkModeCompare(t, commRecorder(t.comm).collectives() - t.colls.size() + 1);
}

}  // namespace

tcclResult_t groupLaunch(std::vector<CommTasks>& comms) {
  // (One communicator, the common case, records without a heap allocation: this runs on
  // every call, and the host path of a small all-reduce takes a few hundred nanoseconds.)
  FrSpan one;
  std::vector<FrSpan> many(comms.size() > 1 ? comms.size() : 0);
  FrSpan* spans = comms.size() > 1 ? many.data() : &one;
  // TCCL_FAULT (fault_inject.h) strikes as its operation is called, before it is recorded: a
  // stalled rank's record shows when it really joined.
  if (faultEnabled()) {
    for (CommTasks& t : comms) {
      const uint64_t first = commRecorder(t.comm).nextRecordId() + 1;  // (operations count from 1)
      faultAtCall(&commContext(t.comm), first, first + t.colls.size() + t.p2p.size() - 1);
    }
  }
  for (size_t i = 0; i < comms.size(); i++) spans[i] = frRecord(comms[i]);
  tcclResult_t res = checkModeEnabled() ? checkGroup(comms) : tcclSuccess;
  if (res == tcclSuccess) res = launchGroup(comms);
  for (size_t i = 0; i < comms.size(); i++) {
    const FrSpan& sp = spans[i];
    if (!sp.any) continue;
    FlightRecorder& fr = commRecorder(comms[i].comm);
    // Kernels launched (executor_gpu.cu counts them): the operations complete with that launch.
    // Otherwise they are over now: host buffers moved, nothing to move, captured into a
    // graph (which runs later, as the graph's replays), or failed.
    const uint64_t launches = commLaunch(comms[i].comm).launches.load(std::memory_order_relaxed);
    if (res == tcclSuccess && launches != sp.launches) {
      fr.launched(sp.first, sp.last, launches);
    } else {
      fr.finish(sp.first, sp.last, res);
    }
  }
  return res;
}

}  // namespace tccl
