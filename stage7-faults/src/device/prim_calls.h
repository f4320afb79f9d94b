/*
 * device/prim_calls.h: what the two protocols' primitives share: the seven calls, and the
 * step timeline's records.
 *
 * What it is: the calls every algorithm is written in (device/primitives.h lists them), each
 * one the same generic operation with other flags:
 *
 *   call                  reads the peer   own input   writes the output   sends on
 *   send                                   yes                             yes
 *   recv                  yes                          yes
 *   copySend                               yes         yes                 yes
 *   recvCopySend          yes                          yes                 yes
 *   recvReduceSend        yes              yes                             yes
 *   recvReduceCopy        yes              yes         yes
 *   recvReduceCopySend    yes              yes         yes                 yes
 *
 * Simple's Primitives and LL's PrimitivesLL (device/prims_ll.h) each implement that operation,
 * op(), and inherit the calls from here (the curiously recurring template pattern: no virtual
 * call, the compiler sees the protocol's op() directly), with chunk() and the fields and
 * builder of their step records (device/trace_record.h).
 *
 * Invariants: a call moves n elements of T; `postOp` applies the functor's post() to a final
 * result (the two calls that can produce one take it).
 *
 * NCCL counterpart: the wrappers of src/device/primitives.h around genericOp / LLGenericOp.
 * Added in: stage 5 (the calls were Primitives' own before there were two protocols).
 */
#ifndef TCCL_DEVICE_PRIM_CALLS_H_
#define TCCL_DEVICE_PRIM_CALLS_H_

#include <cstddef>

#include "device/fifo.h"
#include "device/trace_record.h"

namespace tccl {

template <class Prims, typename T>
class PrimitiveCalls {
 public:
  TCCL_HOST_DEVICE bool send(const T* src, size_t n) {
    return self().op(TraceWhat::kSend, src, nullptr, n, false, true, false);
  }
  TCCL_HOST_DEVICE bool recv(T* dst, size_t n) {
    return self().op(TraceWhat::kRecv, nullptr, dst, n, true, false, false);
  }
  TCCL_HOST_DEVICE bool copySend(const T* src, T* dst, size_t n) {
    return self().op(TraceWhat::kCopySend, src, dst, n, false, true, false);
  }
  TCCL_HOST_DEVICE bool recvCopySend(T* dst, size_t n) {
    return self().op(TraceWhat::kRecvCopySend, nullptr, dst, n, true, true, false);
  }
  TCCL_HOST_DEVICE bool recvReduceSend(const T* src, size_t n) {
    return self().op(TraceWhat::kRecvReduceSend, src, nullptr, n, true, true, false);
  }
  TCCL_HOST_DEVICE bool recvReduceCopy(const T* src, T* dst, size_t n, bool postOp = false) {
    return self().op(TraceWhat::kRecvReduceCopy, src, dst, n, true, false, postOp);
  }
  TCCL_HOST_DEVICE bool recvReduceCopySend(const T* src, T* dst, size_t n, bool postOp = false) {
    return self().op(TraceWhat::kRecvReduceCopySend, src, dst, n, true, true, postOp);
  }

  /// Names the algorithm's chunk that the next call moves (shown in step traces only).
  TCCL_HOST_DEVICE Prims& chunk(int c) {
    chunk_ = c;
    return self();
  }

 protected:
  /// A record of a call or one of its steps, from t0 to t1, on these connections.
  TCCL_HOST_DEVICE TraceRecord makeRecord(TraceWhat what, uint64_t t0, uint64_t t1,
                                          uint64_t recvStep, uint64_t sendStep,
                                          int64_t bytes) const {
    TraceRecord r;
    r.t0 = t0;
    r.t1 = t1;
    r.recvStep = recvStep;
    r.sendStep = sendStep;
    r.bytes = bytes;
    r.chunk = -1;
    r.recvPeer = recvPeer_;
    r.sendPeer = sendPeer_;
    r.channel = channel_;
    r.what = uint8_t(what);
    return r;
  }

  // Step timeline only (set when tracing): the chunk chunk() named, who is at the ends.
  int32_t chunk_ = -1;
  int16_t recvPeer_ = -1, sendPeer_ = -1, channel_ = 0;

 private:
  TCCL_HOST_DEVICE Prims& self() { return *static_cast<Prims*>(this); }
};

}  // namespace tccl

#endif  // TCCL_DEVICE_PRIM_CALLS_H_
