/*
 * device/direct.h: host direct mode as the primitives see it -- which steps of a call go
 * straight between the user's buffer and the proxy.
 *
 * What it is: the per-call half of direct mode; fifo.h has the FIFO half (ptrs, claims,
 * staged) and why it pays. A backend names its policy (Backend::Direct) and the primitives
 * ask it, once per call and once per step:
 *
 *   send        a plain send of plain data lends src: the proxy sends from the user's input
 *   fromDst     a call with a dst and a send lends dst once the step's result is written
 *               there: one write instead of two
 *   recv        a receive without a reduction (recv, recvCopySend) pre-posts dst: the proxy
 *               receives into it, so a forwarded step goes socket -> dst -> socket untouched
 *   staging     any other receive on a direct connection lets the proxy stage the call's
 *               steps in the slots as they arrive (they feed a reduction or a forward)
 *
 * A call with a second peer on a side (a tree node's children) lends nothing on that side and
 * receives nothing in place: its result is written once and read twice.
 *
 * HostDirect is the host executor's policy; NoDirect the kernels': every answer is a
 * compile-time no, so no kernel carries any of this.
 *
 * Invariants: a pointer lent to the proxy stays valid until the call returns (drain waits
 * until the proxy has sent every lent step); a received step lands in dst only when the
 * consumer's offer won the step's claim (fifo.h), otherwise the primitive copies it from the
 * slot like any other.
 *
 * NCCL counterpart: the Direct* variants of src/device/prims_simple.h (ptrsFifo, DirectRead /
 * DirectWrite), which NCCL uses between GPUs; tccl lends between a host thread and its proxy.
 * Added in: stage 3.
 */
#ifndef TCCL_DEVICE_DIRECT_H_
#define TCCL_DEVICE_DIRECT_H_

#include <cstddef>
#include <cstdint>

#include "device/fifo.h"

namespace tccl {

/// The kernels' policy: nothing is direct.
struct NoDirect {
  TCCL_HOST_DEVICE NoDirect(bool, const void*, void*, ConnInfo* const*, const uint64_t*, int,
                            ConnInfo* const*, int, uint64_t) {}
  static constexpr bool send = false;
  static constexpr bool fromDst = false;
  TCCL_HOST_DEVICE static constexpr bool lends() { return false; }
  TCCL_HOST_DEVICE static constexpr bool beforeRecvWait(int, uint64_t, char*, size_t) {
    return false;
  }
  TCCL_HOST_DEVICE static constexpr char* lent(const void*, void*) { return nullptr; }
  TCCL_HOST_DEVICE static void prepostRecv(ConnInfo*, uint64_t, uint64_t) {}
};

/// The host executor's policy: one object per primitive call.
class HostDirect {
 public:
  /// plainData: the functor has no pre/post (src may go out as it is); src/dst: the call's
  /// input and output (null: none); recvs[0..nRecv) and sends[0..nSend): the connections that
  /// take part, recvStep their next steps; callSteps: how many steps the call cuts.
  TCCL_HOST_DEVICE HostDirect(bool plainData, const void* src, void* dst, ConnInfo* const* recvs,
                              const uint64_t* recvStep, int nRecv, ConnInfo* const* sends,
                              int nSend, uint64_t callSteps)
      : recvConn_(recvs), offers_{nRecv > 0 ? recvStep[0] : 0} {
    const bool sendOk = nSend == 1 && sends[0]->direct;
    send = sendOk && plainData && nRecv == 0 && src && !dst;
    fromDst = sendOk && dst;
    // A receive in place needs every reader of the step to read dst: no reduction (no src),
    // and a send, if any, that lends dst rather than reading a slot.
    inPlace_ = nRecv == 1 && recvs[0]->direct && !src && dst && (nSend == 0 || fromDst);
    for (int i = 0; i < nRecv; i++) end_[i] = recvStep[i] + callSteps;
  }

  bool send = false;     // the proxy sends each step from src
  bool fromDst = false;  // the proxy sends each step from dst, once the step is written there

  /// Whether the proxy holds pointers into the user's buffers until the call drains them.
  TCCL_HOST_DEVICE bool lends() const { return send || fromDst; }

  /// Before the wait for receive peer i's `step`: a receive in place offers every step of
  /// the call that fits in the FIFO (a pre-posted receive: bytes that come while this thread
  /// is away still land in dst, which is `bytes` long); any other receive on a direct
  /// connection lets the proxy stage up to the call's last step. True when the step lands
  /// (or landed) in dst.
  TCCL_HOST_DEVICE bool beforeRecvWait(int i, uint64_t step, char* dst, size_t bytes) {
    ConnInfo* c = recvConn_[i];
    if (inPlace_) {
      offers_.offerUpTo(c->fifo, c->stepBytes, dst, bytes, step + kNSteps);
      return offers_.landed(step);
    }
    // The slots of steps below step + kNSteps are all consumed: the FIFO holds no more.
    if (c->direct) allowStaging(c->fifo, step + kNSteps < end_[i] ? step + kNSteps : end_[i]);
    return false;
  }

  /// What the proxy sends this step from (the step's piece of src or dst), null for the slot.
  TCCL_HOST_DEVICE char* lent(const void* srcStep, void* dstStep) const {
    return send ? (char*)srcStep : fromDst ? (char*)dstStep : nullptr;
  }

  /// An exchange's receive announced before its send (device/rec_doubling.h): the proxy may
  /// stage the `steps` steps from `step` on as they arrive, so that neither side's send waits
  /// on a socket the other side has not drained (MPI_Irecv before MPI_Send).
  TCCL_HOST_DEVICE static void prepostRecv(ConnInfo* c, uint64_t step, uint64_t steps) {
    if (c == nullptr || !c->direct || steps == 0) return;
    allowStaging(c->fifo, step + (steps < uint64_t(kNSteps) ? steps : uint64_t(kNSteps)));
  }

 private:
  ConnInfo* const* recvConn_;
  bool inPlace_ = false;
  RecvOffers offers_;            // a receive in place: its offers so far (fifo.h)
  uint64_t end_[kMaxFan] = {};   // per receive peer: the call's last step + 1
};

}  // namespace tccl

#endif  // TCCL_DEVICE_DIRECT_H_
