/*
 * device/direct.h: host direct mode as the primitives see it -- which steps of a call go
 * straight between the user's buffer and the proxy.
 *
 * What it is: the per-call half of direct mode; fifo.h has the FIFO half (ptrs, offers and
 * claims, staging) and why it pays. A backend names its policy (Backend::Direct), and a
 * primitive call makes one and asks it, once per call and once per step:
 *
 *   send       a plain send of plain data lends src: the proxy sends from the user's input
 *   fromDst    a call with a dst and a send lends dst once the step's result is written
 *              there: one write instead of two
 *   in place   a receive without a reduction (recv, recvCopySend) pre-posts dst: the proxy
 *              receives into it, so a forwarded step goes socket -> dst -> socket untouched
 *              (only with a lending send: a slot-reading send would need a copy of it)
 *   staging    any other receive on a direct connection lets the proxy stage the call's
 *              steps in the slots as they arrive (they feed a reduction or a forward)
 *
 * A call with a second peer on a side (a tree node's children) lends nothing on that side and
 * receives nothing in place: its result is written once and read twice.
 *
 * HostDirect is the host executor's policy; NoDirect the kernels': every answer is a
 * compile-time no, so no kernel carries any of this (their PTX is the same as without it).
 *
 * Invariants: a pointer lent to the proxy stays valid until the call returns (the primitive
 * waits until the proxy has sent every lent step); a received step lands in dst only when the
 * consumer's offer won the step's claim (fifo.h), otherwise the primitive copies it from the
 * slot like any other.
 *
 * NCCL counterpart: the Direct* variants of src/device/prims_simple.h (ptrsFifo, DirectRead /
 * DirectWrite), which NCCL uses between GPUs; tccl lends between a host thread and its proxy.
 * Added in: stage 3 (the host fast path).
 */
#ifndef TCCL_DEVICE_DIRECT_H_
#define TCCL_DEVICE_DIRECT_H_

#include <cstddef>
#include <cstdint>

#include "device/fifo.h"

namespace tccl {

/// What one primitive call is, as direct mode needs it.
struct DirectCall {
  bool plainData;     // the functor has no pre/post: src may go out as it is
  const void* src;    // the user-side input and output (null: none)
  void* dst;
  size_t bytes;       // the call's size
  size_t stepBytes;   // the bytes of its full steps
  ConnInfo* recv;     // the first connection of each side that takes part (null: that side
  bool fanIn;         // does not), and whether a second one does (a tree node's children)
  ConnInfo* send;
  bool fanOut;
  uint64_t recvStep;  // the first receive's next step
};

/// The kernels' policy: nothing is direct.
struct NoDirect {
  TCCL_HOST_DEVICE explicit NoDirect(const DirectCall&) {}
  static constexpr bool send = false;
  static constexpr bool fromDst = false;
  TCCL_HOST_DEVICE static constexpr bool lends() { return false; }
  TCCL_HOST_DEVICE static constexpr bool beforeRecvWait(int, ConnInfo*, uint64_t, uint64_t) {
    return false;
  }
  TCCL_HOST_DEVICE static constexpr char* lent(const void*, void*) { return nullptr; }
  TCCL_HOST_DEVICE static void prepostRecv(ConnInfo*, uint64_t, uint64_t) {}
};

/// The host executor's policy: one object per primitive call.
class HostDirect {
 public:
  TCCL_HOST_DEVICE explicit HostDirect(const DirectCall& c)
      : call_(c), offers_{c.recvStep} {
    const bool sendOk = c.send != nullptr && c.send->direct && !c.fanOut;
    send = sendOk && c.plainData && c.recv == nullptr && c.src && !c.dst;
    fromDst = sendOk && c.dst;
    inPlace_ = c.recv != nullptr && c.recv->direct && !c.fanIn && !c.src && c.dst &&
               (c.send == nullptr || fromDst);
  }

  bool send = false;     // the proxy sends each step from src
  bool fromDst = false;  // the proxy sends each step from dst, once the step is written there

  /// Whether the proxy holds pointers into the user's buffers until the call drains them.
  TCCL_HOST_DEVICE bool lends() const { return send || fromDst; }

  /// Before the wait for `step` of receive connection c, the call's i-th, with `left` steps
  /// of the call to go (this one included): a receive in place offers every step of the call
  /// that fits in the FIFO (a pre-posted receive: bytes that come while this thread is away
  /// still land in dst); any other receive on a direct connection lets the proxy stage up to
  /// the call's last step. True when the step lands (or landed) in dst.
  TCCL_HOST_DEVICE bool beforeRecvWait(int i, ConnInfo* c, uint64_t step, uint64_t left) {
    if (i == 0 && inPlace_) {
      // The slots of steps below step + kNSteps are all consumed: the FIFO holds no more.
      offers_.offerUpTo(c->fifo, call_.stepBytes, static_cast<char*>(call_.dst), call_.bytes,
                        step + kNSteps);
      return offers_.landed(step);
    }
    if (c->direct) allowStaging(c->fifo, upTo(step, step + left));
    return false;
  }

  /// What the proxy sends this step from (the step's piece of src or dst); null: the slot.
  TCCL_HOST_DEVICE char* lent(const void* srcStep, void* dstStep) const {
    return send ? (char*)srcStep : fromDst ? (char*)dstStep : nullptr;
  }

  /// An exchange's receive announced before its send (device/rec_doubling.h): the proxy may
  /// stage the `steps` steps from `step` on as they arrive, so that neither side's send waits
  /// on a socket the other side has not drained (MPI_Irecv before MPI_Send).
  TCCL_HOST_DEVICE static void prepostRecv(ConnInfo* c, uint64_t step, uint64_t steps) {
    if (c == nullptr || !c->direct || steps == 0) return;
    allowStaging(c->fifo, upTo(step, step + steps));
  }

 private:
  /// The last step + 1 the proxy may stage from `step` on: the call's end, or the FIFO's.
  TCCL_HOST_DEVICE static uint64_t upTo(uint64_t step, uint64_t end) {
    const uint64_t ahead = step + kNSteps;  // the FIFO holds no more than this
    return ahead < end ? ahead : end;
  }

  DirectCall call_;
  RecvOffers offers_;      // a receive in place: its offers so far (fifo.h)
  bool inPlace_ = false;
};

}  // namespace tccl

#endif  // TCCL_DEVICE_DIRECT_H_
