/*
 * fault_inject.cc: TCCL_FAULT and its knobs. See fault_inject.h.
 *
 * Added in: stage 7.
 */
#include "fault_inject.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "comm_context.h"

TCCL_PARAM(FaultRank, "FAULT_RANK", 0)
TCCL_PARAM(FaultOp, "FAULT_OP", 1)
TCCL_PARAM(FaultDelayMs, "FAULT_DELAY_MS", 2000)

namespace tccl {

namespace {

struct KindName {
  FaultKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {{FaultKind::kKill, "kill"},   {FaultKind::kStall, "stall"},
                               {FaultKind::kDrop, "drop"},   {FaultKind::kDelay, "delay"},
                               {FaultKind::kCut, "cut"},     {FaultKind::kFlip, "flip"}};

FaultKind parseKind() {
  const std::string text = getEnvString("TCCL_FAULT");
  if (text.empty()) return FaultKind::kNone;
  for (const KindName& k : kKinds) {
    if (text == k.name) return k.kind;
  }
  TCCL_WARN("TCCL_FAULT=%s is not a fault (kill, stall, drop, delay, cut, flip): nothing is "
            "injected", text.c_str());
  return FaultKind::kNone;
}

FaultKind kind() {
  static const FaultKind k = parseKind();
  return k;
}

const char* kindName(FaultKind k) {
  for (const KindName& n : kKinds) {
    if (n.kind == k) return n.name;
  }
  return "none";
}

bool isNetKind(FaultKind k) {
  return k == FaultKind::kDrop || k == FaultKind::kDelay || k == FaultKind::kCut ||
         k == FaultKind::kFlip;
}

}  // namespace

bool faultEnabled() { return kind() != FaultKind::kNone; }

void faultAtCall(CommContext* comm, uint64_t firstOp, uint64_t lastOp) {
  const FaultKind k = kind();
  if (k == FaultKind::kNone || comm->rank != tcclParamFaultRank()) return;
  const uint64_t op = uint64_t(tcclParamFaultOp());
  if (op < firstOp || op > lastOp) return;
  TCCL_WARN("fault injection: TCCL_FAULT=%s at rank %d, operation %lu%s", kindName(k),
            comm->rank, (unsigned long)op,
            isNetKind(k) ? " (on its network connectors)" : "");
  switch (k) {
    case FaultKind::kKill:
      // A crash, not an exit: no destructor runs, no socket is closed politely (the kernel
      // closes them), exactly what a segfault or the OOM killer does to a rank.
      fflush(stdout);
      fflush(stderr);
      raise(SIGKILL);
      break;
    case FaultKind::kStall:
      std::this_thread::sleep_for(std::chrono::milliseconds(tcclParamFaultDelayMs()));
      break;
    default:
      // The proxy acts on it from its next step (a step of this operation, or one of the
      // operation before that is still leaving).
      comm->faultArmed.store(int(k));
      comm->progress.notify();
      break;
  }
}

NetFaultAction faultOnNetSend(CommContext* comm, int peer, char* data, int64_t size) {
  const FaultKind k = FaultKind(comm->faultArmed.load());
  switch (k) {
    case FaultKind::kDrop:
      return NetFaultAction::kDrop;  // (said once, at faultAtCall: every step from now on)
    case FaultKind::kCut:
      TCCL_WARN("fault injection: cut the connection from rank %d to rank %d", comm->rank, peer);
      return NetFaultAction::kCut;
    case FaultKind::kDelay:
      comm->faultArmed.store(0);  // (once)
      TCCL_WARN("fault injection: a step to rank %d waits %ld ms", peer,
                (long)tcclParamFaultDelayMs());
      std::this_thread::sleep_for(std::chrono::milliseconds(tcclParamFaultDelayMs()));
      return NetFaultAction::kSend;
    case FaultKind::kFlip:
      if (size <= 0) return NetFaultAction::kSend;  // (nothing to flip: the next step)
      comm->faultArmed.store(0);
      // The middle byte, its lowest bit: a float of any type changes, no NaN appears from
      // nothing, and the receiver cannot tell (no checksum on the data path, as in NCCL).
      data[size / 2] ^= 0x01;
      TCCL_WARN("fault injection: flipped a bit of byte %ld of a %ld-byte step to rank %d",
                (long)(size / 2), (long)size, peer);
      return NetFaultAction::kSend;
    default:
      return NetFaultAction::kSend;
  }
}

}  // namespace tccl
