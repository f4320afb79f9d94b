/*
 * tests/ring/ring_case.h: runs one collective on one communicator and checks everything.
 *
 * What it is: the body shared by every MPI collective test. A CaseRun prepares one case: this
 * rank's input (ring_inputs.h) in a guarded, poisoned buffer (ring_buffers.h), the receive side
 * poisoned, and the premulsum op when the case asks for one; issue() makes the call (alone, in
 * a group, or back to back with others); check(), once the device is synchronized, destroys the
 * op and checks:
 *  - the result region against the reference (exact bytes for AllGather and Broadcast, which
 *    only move data; compare() with the op's tolerance for the reductions);
 *  - float avg at small counts also against the harness's own reference and tolerance;
 *  - Reduce on a non-root rank: recvbuff untouched (still poison; in place: still its input);
 *  - out of place: the send buffer still holds exactly this rank's input, and every byte of
 *    both allocations outside the regions tccl may write (guards, the skew of an unaligned
 *    case) is still poison;
 *  - in place: the guards.
 * runCase() does the three steps for a case on its own.
 *
 * In place, as tccl.h defines it: sendbuff == recvbuff for AllReduce, Broadcast and Reduce;
 * sendbuff == recvbuff + rank*count for AllGather; recvbuff == sendbuff + rank*count for
 * ReduceScatter. Place::kUnaligned is out of place with both pointers one element past a
 * 256-byte boundary (the vectorised paths must fall back, not misbehave).
 *
 * Invariants: a case makes the same tccl calls in the same order on every rank whatever its
 * checks find; it stops early only when a tccl call fails, which it reports as !callOk so that
 * callers can stop every rank together (their calls would no longer match). A host-immediate
 * premulsum scalar is overwritten right after creation (it must have been read by then).
 *
 * NCCL counterpart: nccl-tests src/{all_reduce,all_gather,reduce_scatter,broadcast,reduce}.cu.
 * Added in: stage 2.
 */
#ifndef TCCL_TESTS_RING_RING_CASE_H_
#define TCCL_TESTS_RING_RING_CASE_H_

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ring_buffers.h"
#include "ring_inputs.h"

namespace tccl {
namespace test {
namespace ring {

enum class Coll { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce };

inline const char* collName(Coll c) {
  switch (c) {
    case Coll::kAllReduce:
      return "allreduce";
    case Coll::kAllGather:
      return "allgather";
    case Coll::kReduceScatter:
      return "reducescatter";
    case Coll::kBroadcast:
      return "broadcast";
    case Coll::kReduce:
      return "reduce";
  }
  return "?";
}
inline std::vector<Coll> allColls() {
  return {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
          Coll::kReduce};
}
inline bool hasOp(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}
inline bool hasRoot(Coll c) { return c == Coll::kBroadcast || c == Coll::kReduce; }

enum class Place { kOutOfPlace, kInPlace, kUnaligned };
inline const char* placeName(Place p) {
  switch (p) {
    case Place::kOutOfPlace:
      return "out-of-place";
    case Place::kInPlace:
      return "in-place";
    case Place::kUnaligned:
      return "unaligned";
  }
  return "?";
}

struct Case {
  Coll coll;
  DType type;
  OpSpec op;
  size_t count;  // per rank for AllGather and ReduceScatter (sendcount / recvcount)
  Place place;
  int root;
  MemKind kind;

  std::string describe() const {
    std::string s = std::string(collName(coll)) + " " + dtypeName(type);
    if (hasOp(coll)) s += " " + op.name();
    s += " count " + std::to_string(count) + " " + placeName(place);
    if (hasRoot(coll)) s += " root " + std::to_string(root);
    return s + " " + memKindName(kind);
  }
};

struct CaseResult {
  bool callOk = true;  // every tccl call returned tcclSuccess
  bool ok = true;      // ... and every check passed
  std::string why;
  void fail(const std::string& reason) {
    if (ok) why = reason;
    ok = false;
  }
};

/// A premulsum op for one case: made before the call, destroyed after it.
class ScopedPreMulSum {
 public:
  tcclResult_t create(const OpSpec& spec, DType t, tcclComm_t comm, tcclRedOp_t* op) {
    comm_ = comm;
    hostScalar_ = typeBits(spec.scalar, t);
    tcclResult_t r;
    if (spec.kind == OpSpec::Kind::kPreMulDevice) {
      scalar_ = std::make_unique<Buffer>(dtypeSize(t), MemKind::kDevice);
      scalar_->upload(&hostScalar_, dtypeSize(t));
      r = tcclRedOpCreatePreMulSum(op, scalar_->data(), toTccl(t), tcclScalarDevice, comm);
    } else {
      r = tcclRedOpCreatePreMulSum(op, &hostScalar_, toTccl(t), tcclScalarHostImmediate, comm);
      // "Immediate": the value was read by the call. The variable outlives the operation and
      // now holds another value, so an implementation that kept the pointer gets it wrong.
      hostScalar_ = typeBits(77, t);
    }
    if (r == tcclSuccess) op_ = *op;
    return r;
  }
  /// Destroys the op (once); returns the result of tcclRedOpDestroy.
  tcclResult_t destroy() {
    if (comm_ == nullptr || !live()) return tcclSuccess;
    tcclResult_t r = tcclRedOpDestroy(op_, comm_);
    op_ = tcclSum;
    return r;
  }
  ~ScopedPreMulSum() { destroy(); }

 private:
  bool live() const { return int(op_) >= int(tcclNumOps); }
  tcclComm_t comm_ = nullptr;
  tcclRedOp_t op_ = tcclSum;
  uint64_t hostScalar_ = 0;
  std::unique_ptr<Buffer> scalar_;
};

/// Compares `count` elements at `got` with `expected`: bytes first (fast), then compare()
/// for the verdict when a tolerance applies (or -0/+0) and for the message.
inline bool resultMatches(const uint8_t* got, const void* expected, size_t count, DType t,
                          double tol, bool bytesOnly, std::string* why) {
  if (count == 0) return true;  // nothing to compare (and memcmp must not see a null pointer)
  if (std::memcmp(got, expected, count * dtypeSize(t)) == 0) return true;
  std::string detail;
  const bool ok = compare(got, expected, count, t, bytesOnly ? 0.0 : tol, &detail);
  if (ok && !bytesOnly) return true;
  *why = detail.empty() ? "bytes differ (values compare equal)" : detail;
  return false;
}

/// One case in three steps, so that several can be issued together (in one group, or back to
/// back on a stream) and checked afterwards: the constructor prepares buffers, input and op;
/// issue() makes the tccl call; check() (after the device is synchronized) destroys the op and
/// verifies everything. Each step records a failed tccl call in result() (callOk false).
class CaseRun {
 public:
  CaseRun(tcclComm_t comm, const Inputs& in, const Case& c)
      : comm_(comm), in_(in), c_(c), tag_("[" + c.describe() + "] ") {
    if (!ok(tcclCommUserRank(comm, &rank_), "tcclCommUserRank") ||
        !ok(tcclCommCount(comm, &n_), "tcclCommCount")) {
      return;
    }
    const size_t es = dtypeSize(c.type);
    sendElems_ = c.coll == Coll::kReduceScatter ? size_t(n_) * c.count : c.count;
    recvElems_ = c.coll == Coll::kAllGather ? size_t(n_) * c.count : c.count;
    inPlace_ = c.place == Place::kInPlace;
    if (inPlace_) {
      recvBuf_ = std::make_unique<CollBuffer>(std::max(sendElems_, recvElems_) * es, c.kind);
      sendOff_ = c.coll == Coll::kAllGather ? size_t(rank_) * c.count * es : 0;
      recvOff_ = c.coll == Coll::kReduceScatter ? size_t(rank_) * c.count * es : 0;
    } else {
      const size_t skew = c.place == Place::kUnaligned ? es : 0;
      sendBuf_ = std::make_unique<CollBuffer>(sendElems_ * es + skew, c.kind);
      recvBuf_ = std::make_unique<CollBuffer>(recvElems_ * es + skew, c.kind);
      sendOff_ = recvOff_ = skew;
    }
    // This rank's input (Broadcast: the root's only; elsewhere the send side stays poison).
    hasInput_ = c.coll != Coll::kBroadcast || rank_ == c.root;
    if (hasInput_) {
      const std::vector<char>& input = in.filled(c.type, rank_, 0, sendElems_);
      sendSide().write(sendOff_, input.data(), input.size());
    }
    if (hasOp(c.coll) && c.op.isPreMul()) {
      ok(preMul_.create(c.op, c.type, comm, &op_), "tcclRedOpCreatePreMulSum");
    } else if (hasOp(c.coll)) {
      op_ = toTccl(c.op.builtin);
    }
  }

  const CaseResult& result() const { return res_; }
  const Case& spec() const { return c_; }
  void* sendPtr() const { return sendSide().data() + sendOff_; }
  void* recvPtr() const { return recvBuf_->data() + recvOff_; }

  /// The collective call itself (inside or outside a group).
  tcclResult_t issue(cudaStream_t stream = nullptr) {
    if (!res_.callOk) return tcclInternalError;  // the constructor failed: nothing to issue
    const tcclDataType_t tt = toTccl(c_.type);
    tcclResult_t r = tcclSuccess;
    switch (c_.coll) {
      case Coll::kAllReduce:
        r = tcclAllReduce(sendPtr(), recvPtr(), c_.count, tt, op_, comm_, stream);
        break;
      case Coll::kAllGather:
        r = tcclAllGather(sendPtr(), recvPtr(), c_.count, tt, comm_, stream);
        break;
      case Coll::kReduceScatter:
        r = tcclReduceScatter(sendPtr(), recvPtr(), c_.count, tt, op_, comm_, stream);
        break;
      case Coll::kBroadcast:
        r = tcclBroadcast(sendPtr(), recvPtr(), c_.count, tt, c_.root, comm_, stream);
        break;
      case Coll::kReduce:
        r = tcclReduce(sendPtr(), recvPtr(), c_.count, tt, op_, c_.root, comm_, stream);
        break;
    }
    ok(r, collName(c_.coll));
    return r;
  }

  /// True when the receive buffer (out of place) holds nothing but poison: the call never ran.
  bool recvUntouched(std::string* why) {
    return recvBuf_->untouchedOutside(recvBuf_->view(), 0, 0, why);
  }

  /// Destroys the op and checks the buffers. Synchronize the device first.
  CaseResult check() {
    if (!res_.callOk) return res_;
    ok(preMul_.destroy(), "tcclRedOpDestroy");
    checkResult();
    checkUntouched();
    return res_;
  }

 private:
  CollBuffer& sendSide() const { return inPlace_ ? *recvBuf_ : *sendBuf_; }

  bool ok(tcclResult_t r, const char* call) {
    if (r == tcclSuccess) return true;
    res_.callOk = false;
    res_.fail(tag_ + call + " returned " + tcclGetErrorString(r) + ": " + tcclGetLastError(comm_));
    return false;
  }

  /// The result region (the root's only, for Reduce).
  void checkResult() {
    const DType t = c_.type;
    const size_t blk = c_.count * dtypeSize(t);
    std::string why;
    const uint8_t* rv = recvBuf_->view();
    const uint8_t* got = rv + CollBuffer::kGuard + recvOff_;
    if (c_.coll == Coll::kReduce && rank_ != c_.root) {
      // Not significant here: recvbuff must not be written at all.
      if (inPlace_) {
        const std::vector<char>& input = in_.filled(t, rank_, 0, sendElems_);
        if (blk != 0 && std::memcmp(got, input.data(), blk) != 0) {
          res_.fail(tag_ + "non-root recvbuff (in place: its input) was modified");
        }
      } else if (!recvBuf_->untouchedOutside(rv, 0, 0, &why)) {
        res_.fail(tag_ + "non-root recvbuff: " + why);
      }
      return;
    }
    if (c_.coll == Coll::kAllGather || c_.coll == Coll::kBroadcast) {
      const int blocks = c_.coll == Coll::kAllGather ? n_ : 1;
      for (int b = 0; b < blocks && res_.ok; b++) {
        const int src = c_.coll == Coll::kAllGather ? b : c_.root;
        const std::vector<char>& expected = in_.filled(t, src, 0, c_.count);
        if (!resultMatches(got + b * blk, expected.data(), c_.count, t, 0, true, &why)) {
          res_.fail(tag_ + "recvbuff block " + std::to_string(b) + " (from rank " +
                    std::to_string(src) + "): " + why);
        }
      }
      return;
    }
    const size_t offset = c_.coll == Coll::kReduceScatter ? size_t(rank_) * c_.count : 0;
    const std::vector<char>& expected = in_.reduced(t, c_.op, offset, c_.count);
    if (!resultMatches(got, expected.data(), c_.count, t, in_.tolerance(t, c_.op), false, &why)) {
      res_.fail(tag_ + "recvbuff: " + why);
    }
    if (!c_.op.isPreMul() && c_.op.builtin == RedOp::kAvg && isFloat(t) &&
        c_.count <= kHarnessRefMaxCount) {
      // The harness's reference is the correctly rounded sum/n; its tolerance bounds the
      // difference from pre-multiplying by a rounded 1/n.
      std::vector<char> harness(blk);
      referenceReduce(harness.data(), c_.count, t, RedOp::kAvg, n_, in_.seed(), offset);
      if (!resultMatches(got, harness.data(), c_.count, t, tolerance(t, RedOp::kAvg, n_), false,
                         &why)) {
        res_.fail(tag_ + "recvbuff against the harness's avg reference: " + why);
      }
    }
  }

  /// Nothing outside the result may change: guards (and an unaligned skew) stay poison; out
  /// of place, the send buffer still holds exactly this rank's input.
  void checkUntouched() {
    std::string why;
    const uint8_t* rv = recvBuf_->view();
    if (inPlace_) {
      if (!recvBuf_->guardsIntact(rv, &why)) res_.fail(tag_ + "buffer guard: " + why);
      return;
    }
    const bool resultWritten = !(c_.coll == Coll::kReduce && rank_ != c_.root);
    const size_t es = dtypeSize(c_.type);
    if (resultWritten && !recvBuf_->untouchedOutside(rv, recvOff_, recvElems_ * es, &why)) {
      res_.fail(tag_ + "recvbuff: " + why);
    }
    const uint8_t* sv = sendBuf_->view();
    const size_t inBytes = hasInput_ ? sendElems_ * es : 0;
    if (!sendBuf_->untouchedOutside(sv, sendOff_, inBytes, &why)) {
      res_.fail(tag_ + "sendbuff: " + why);
    } else if (hasInput_) {
      const std::vector<char>& input = in_.filled(c_.type, rank_, 0, sendElems_);
      if (inBytes != 0 &&
          std::memcmp(sv + CollBuffer::kGuard + sendOff_, input.data(), inBytes) != 0) {
        res_.fail(tag_ + "sendbuff (this rank's input) was modified");
      }
    }
  }

  tcclComm_t comm_;
  const Inputs& in_;
  Case c_;
  std::string tag_;
  CaseResult res_;
  int rank_ = 0, n_ = 1;
  size_t sendElems_ = 0, recvElems_ = 0;
  bool inPlace_ = false, hasInput_ = false;
  std::unique_ptr<CollBuffer> sendBuf_, recvBuf_;
  size_t sendOff_ = 0, recvOff_ = 0;  // payload byte offsets of the two pointers
  tcclRedOp_t op_ = tcclSum;
  ScopedPreMulSum preMul_;
};

/// Runs one case on its own: prepare, call, synchronize, check.
inline CaseResult runCase(tcclComm_t comm, const Inputs& in, const Case& c) {
  CaseRun run(comm, in, c);
  if (run.result().callOk) run.issue();
  deviceSync();
  return run.check();
}

/// Creates a communicator over MPI_COMM_WORLD: world rank 0 makes the id, MPI_Bcast spreads it.
inline tcclResult_t initWorldComm(tcclComm_t* comm) {
  tcclUniqueId id{};
  tcclResult_t res = tcclSuccess;
  if (worldRank() == 0) res = tcclGetUniqueId(&id);
  // Everyone learns whether rank 0 has an id; otherwise the others would wait in init.
  if (!allRanksOk(res == tcclSuccess)) return res != tcclSuccess ? res : tcclSystemError;
  bcast(&id, sizeof(id), 0);
  return tcclCommInitRank(comm, worldSize(), id, worldRank());
}

}  // namespace ring
}  // namespace test
}  // namespace tccl

#endif  // TCCL_TESTS_RING_RING_CASE_H_
