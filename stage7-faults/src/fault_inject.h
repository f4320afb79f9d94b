/*
 * fault_inject.h: fault injection -- the failures of chapter 7, made to happen on purpose at a
 * given rank and operation, never at a point in time (so a test or a lab fails the same way
 * on every run, however fast the machine).
 *
 * What it is: four knobs, read once per process.
 *   TCCL_FAULT          what goes wrong (empty: nothing):
 *     kill    the rank dies (SIGKILL) as it calls the operation: a crash mid-job;
 *     stall   the rank sleeps TCCL_FAULT_DELAY_MS before the operation: a straggler;
 *     drop    from the operation on, the rank's network sends vanish (the proxy takes each
 *             step and never sends it): a black-holed link, peers wait for data that never
 *             comes, until their watchdog fires;
 *     delay   the rank's first network send of the operation waits TCCL_FAULT_DELAY_MS
 *             first: a slow link;
 *     cut     the rank's network connections close as they next send: peers see the
 *             connection end (tcclRemoteError at once), the rank its own error;
 *     flip    one byte of the first network step of the operation is flipped before it
 *             leaves: silent data corruption.
 *   TCCL_FAULT_RANK     the rank that injects it (default 0), in every communicator where
 *                       the process has that rank;
 *   TCCL_FAULT_OP       the operation, counted from 1 in issue order, collectives and
 *                       send/recv alike (the flight recorder's record_id + 1; with only
 *                       collectives, its collective_seq_id); default 1;
 *   TCCL_FAULT_DELAY_MS stall's and delay's wait (default 2000).
 * drop, delay, cut and flip act on network connectors (NET/Socket, NET/IB): ranks of one
 * host talk over P2P or SHM unless TCCL_P2P_DISABLE=1 TCCL_SHM_DISABLE=1.
 *
 * Invariants: without TCCL_FAULT the cost is one test of a cached flag per call and one load
 * of comm->faultArmed per proxy pass; every injected fault says so in a warning first (a
 * learner's log shows what was done to it, a lab's answer is graded against it); drop and cut
 * stay armed (a link does not heal), delay and flip act once.
 *
 * NCCL counterpart: none in NCCL (its tests use NCCL_RAS and real failures); PyTorch's
 * torch.distributed tests kill ranks at chosen points the same way.
 * Added in: stage 7.
 */
#ifndef TCCL_FAULT_INJECT_H_
#define TCCL_FAULT_INJECT_H_

#include <cstdint>

#include "core.h"


namespace tccl {

struct CommContext;

enum class FaultKind : int { kNone = 0, kKill, kStall, kDrop, kDelay, kCut, kFlip };

/// Whether TCCL_FAULT names a fault (false also when it is misspelled: that is a warning).
bool faultEnabled();

/// A call is about to run operations [firstOp, lastOp] (numbers from 1) of `comm`: injects
/// kill and stall here, and arms the network kinds (comm->faultArmed) for the proxy.
void faultAtCall(CommContext* comm, uint64_t firstOp, uint64_t lastOp);

/// What the network send side does with its next step while a fault is armed.
enum class NetFaultAction { kSend, kDrop, kCut };
/// Called by the proxy before a step of `size` bytes at `data` goes to rank `peer`, only when
/// comm->faultArmed is set: delays, flips a byte, or says to drop the step or cut the link.
NetFaultAction faultOnNetSend(CommContext* comm, int peer, char* data, int64_t size);

}  // namespace tccl

#endif  // TCCL_FAULT_INJECT_H_
