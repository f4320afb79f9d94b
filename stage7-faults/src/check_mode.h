/*
 * check_mode.h: the check mode -- ranks compare each collective's signature before it runs.
 *
 * What it is: with TCCL_CHECK_MODE=1, every group of collectives on one communicator is
 * preceded by an all-gather over the bootstrap (out of band: the data path is not involved)
 * of each rank's signature of the group: how many collectives, and for each its function,
 * element count, type, reduction and root. If any rank's list differs from another's, no
 * rank runs the group: every rank returns tcclInvalidUsage, and its warning names the first
 * collective that differs and what each of two disagreeing ranks called ("collective 2: rank 0
 * called all_reduce of 1000 x float32 (sum), rank 1 called broadcast of 1000 x float32 (root
 * 0)"). Without it those calls hang, or worse, complete with wrong data: a broadcast posted
 * against an all-reduce, or a different count, type or root, can run to the end on the same
 * connections (chapter 7's page shows which).
 *
 * Why out of band and per group: the comparison must not depend on the data path that is
 * about to be misused, and every rank must reach the same verdict, which an all-gather of
 * the same bytes gives. The cost is one bootstrap all-gather per group (measured in the
 * chapter's page); that is why it is a debugging mode, off by default, as NCCL's.
 *
 * Limits: sends and receives are not compared (a size mismatch there is already an error of
 * the receiving side); a group that spans several communicators driven by one thread is not
 * checked (the all-gather of the first would wait for the others, which the same thread has
 * not reached: it would deadlock); a rank that never calls at all leaves the others in the
 * all-gather until TCCL_BOOTSTRAP_TIMEOUT (the watchdog cannot interrupt a bootstrap wait).
 *
 * Invariants: with the mode off nothing here runs; the verdict is the same on every rank.
 *
 * NCCL counterpart: NCCL_CHECK_MODE (NCCL 2.29), which compares operations across ranks in
 * the same spirit; PyTorch: TORCH_DISTRIBUTED_DEBUG=DETAIL's collective fingerprint check
 * (ProcessGroupWrapper), which all-gathers each collective's op, shapes and dtypes over Gloo.
 * Added in: stage 7.
 */
#ifndef TCCL_CHECK_MODE_H_
#define TCCL_CHECK_MODE_H_

#include "core.h"
#include "group.h"

namespace tccl {

/// TCCL_CHECK_MODE: 1 compares every collective group across ranks before it runs.
bool checkModeEnabled();

/// Compares this group's collectives (of one communicator) with every other rank's; on a
/// mismatch returns tcclInvalidUsage, on every rank, with a warning naming both calls.
/// `firstSeq` is the collective_seq_id of the group's first collective (for the message).
tcclResult_t checkModeCompare(const CommTasks& t, uint64_t firstSeq);

}  // namespace tccl

#endif  // TCCL_CHECK_MODE_H_
