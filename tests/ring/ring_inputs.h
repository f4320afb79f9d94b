/*
 * tests/ring/ring_inputs.h: the inputs of the collective tests and what their results must be.
 *
 * What it is: every rank's input is the harness's tccl::test::inputValue (small integers, see
 * common/harness/reference.cc), read from a table so that any rank can compute any other rank's
 * input, and so that the reference of a reduction is a cheap loop over that table. Three kinds
 * of reference:
 *  - the built-in ops (sum, prod, max, min, integer avg) at small counts: the harness's own
 *    referenceReduce; at larger counts the same arithmetic from the table (exact integers, so
 *    the two agree; ring_sweep_test.cc checks that they do), because referenceReduce costs
 *    ~100 ns per element and rank, which the medium counts (up to 640 Ki elements) x 50
 *    (type, op) pairs cannot afford;
 *  - premulsum (sum over ranks of scalar * x_r): each rank's x_r * scalar rounded to the
 *    element type, as the library's pre() does, then summed exactly and rounded once;
 *  - float avg: premulsum by 1/nranks rounded to the type (the library does what NCCL does:
 *    it scales each input as it enters), so the same model with that scalar.
 * Floating results of premulsum and float avg are compared with a tolerance that bounds the
 * roundings of the n-1 additions of the ring (float16.h's accuracy rule: every step rounds to
 * the element type); it is 0 whenever every product and partial sum is representable.
 *
 * Invariants:
 *  - Inputs::value(rank, i) == inputValue(i % period, t, rank, seed): the harness's values, so
 *    fill() writes exactly what fillInput would (for i < period). A period smaller than the
 *    count (the 64 Mi-element cases) repeats them; the period is an odd prime, so data moved
 *    by a power-of-two distance (a chunk, a step, a rank's block) lands on another phase of
 *    the pattern, where most values differ.
 *  - inputValue depends on the data type only through its signedness: one table per
 *    signedness serves all ten types.
 *  - Integer results are exact, computed in int64 and wrapped to the type on store (what the
 *    element type's own wrap-around arithmetic gives); for nranks <= kMaxExactRanks (8; the
 *    tests run at most 7) nothing wraps, prod included (the harness bounds |prod| by 120),
 *    except where a premulsum scalar makes it (scalar 100 in 8-bit types, on purpose).
 *
 * NCCL counterpart: nccl-tests src/common.cu (InitData, CheckData) in spirit.
 * Added in: stage 2.
 */
#ifndef TCCL_TESTS_RING_RING_INPUTS_H_
#define TCCL_TESTS_RING_RING_INPUTS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tccl.h"
#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace ring {

/// tccl's enums and the harness's share their values (harness.h says so).
inline tcclDataType_t toTccl(DType t) { return static_cast<tcclDataType_t>(static_cast<int>(t)); }
inline tcclRedOp_t toTccl(RedOp op) { return static_cast<tcclRedOp_t>(static_cast<int>(op)); }

inline bool isSignedType(DType t) {
  return t == DType::kInt8 || t == DType::kInt32 || t == DType::kInt64 || isFloat(t);
}

/// Up to this many elements the built-in reductions are checked against referenceReduce.
constexpr size_t kHarnessRefMaxCount = 8192;

/// A reduction as a test names it: a built-in op, or a premulsum made for the test.
struct OpSpec {
  enum class Kind { kBuiltin, kPreMulHost, kPreMulDevice };
  Kind kind = Kind::kBuiltin;
  RedOp builtin = RedOp::kSum;  // kBuiltin only
  double scalar = 1;            // premulsum: the scalar (converted to the element type)
  bool exact = false;           // premulsum: every product and partial sum is representable
  const char* label = "";       // premulsum: the name of the variant

  std::string name() const {
    if (kind == Kind::kBuiltin) return redOpName(builtin);
    return label;
  }
  bool isPreMul() const { return kind != Kind::kBuiltin; }
};

inline OpSpec builtinOp(RedOp op) {
  OpSpec s;
  s.builtin = op;
  return s;
}

/// A premulsum variant; `exact` promises that every product and partial sum is representable.
inline OpSpec preMulOp(OpSpec::Kind kind, double scalar, bool exact, const char* label) {
  OpSpec s;
  s.kind = kind;
  s.scalar = scalar;
  s.exact = exact;
  s.label = label;
  return s;
}

/// premul_host_exact: -1.5 for floats, -3 / 3 for signed / unsigned integers, from a host
/// scalar (tcclScalarHostImmediate). Every product and partial sum is exact (|sum| <= 27 in
/// halves, within bfloat16's 8 significant bits), so the result must be too.
inline OpSpec preMulHostExact(DType t) {
  return preMulOp(OpSpec::Kind::kPreMulHost, isFloat(t) ? -1.5 : (isSignedType(t) ? -3 : 3), true,
                  "premul_host_exact");
}

/// The reductions a test sweeps for type t: the five built-ins and premulsum variants:
///  - premul_host_exact (above);
///  - premul_host_round (tcclScalarHostImmediate): 1/3 for floats (rounded products, then
///    rounded sums: the tolerance case); 100 for integers (8-bit types wrap, on purpose);
///  - premul_device (tcclScalarDevice, only when a GPU exists): 0.5 for floats, 2 for integers.
inline std::vector<OpSpec> opsFor(DType t, bool withDeviceScalar) {
  std::vector<OpSpec> ops;
  for (RedOp op : allRedOps()) ops.push_back(builtinOp(op));
  ops.push_back(preMulHostExact(t));
  ops.push_back(preMulOp(OpSpec::Kind::kPreMulHost, isFloat(t) ? 1.0 / 3.0 : 100, !isFloat(t),
                         "premul_host_round"));
  if (withDeviceScalar) {
    ops.push_back(
        preMulOp(OpSpec::Kind::kPreMulDevice, isFloat(t) ? 0.5 : 2, true, "premul_device"));
  }
  return ops;
}

/// `v` as the element type holds it (rounded for floats, truncated and wrapped for integers).
inline double roundToType(double v, DType t) {
  uint64_t bits = 0;
  storeFromDouble(&bits, 0, t, v);
  return loadAsDouble(&bits, 0, t);
}

/// The bits of `v` in type t (the premulsum scalar as tcclRedOpCreatePreMulSum wants it).
inline uint64_t typeBits(double v, DType t) {
  uint64_t bits = 0;
  storeFromDouble(&bits, 0, t, v);
  return bits;
}

/// Calls gen(dst, j, n) for elements [j, j+n) of one period (j + n <= period) so that `out`
/// receives elements [offset, offset+count) of the periodic sequence.
template <typename Gen>
void tilePeriodic(void* out, size_t esize, size_t offset, size_t count, size_t period, Gen gen) {
  char* p = static_cast<char*>(out);
  size_t j = offset % period;
  if (j + count <= period) {
    gen(p, j, count);
    return;
  }
  std::vector<char> one(period * esize);
  gen(one.data(), 0, period);
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(period - j, count - done);
    std::memcpy(p + done * esize, one.data() + j * esize, n * esize);
    done += n;
    j = 0;
  }
}

/// storeFromDouble for the values these tests produce, without its per-element cost (it
/// dominated the run time): integer-valued doubles go to integer types by a wrapping cast
/// (what storeFromDouble does for them), float32/float64 by the compiler's conversion (ditto),
/// and float16/bfloat16 through storeFromDouble behind a small memo, since results take few
/// distinct values.
class FastStore {
 public:
  explicit FastStore(DType t) : t_(t), size_(dtypeSize(t)) {}
  void operator()(void* buf, size_t i, double v) {
    char* dst = static_cast<char*>(buf) + i * size_;
    switch (t_) {
      case DType::kFloat32: {
        const float f = static_cast<float>(v);
        std::memcpy(dst, &f, 4);
        return;
      }
      case DType::kFloat64:
        std::memcpy(dst, &v, 8);
        return;
      case DType::kFloat16:
      case DType::kBfloat16: {
        uint64_t key;
        std::memcpy(&key, &v, 8);
        Memo& m = memo_[(key ^ (key >> 29) ^ (key >> 47)) % kMemo];
        if (!m.valid || m.key != key) {
          storeFromDouble(&m.bits, 0, t_, v);
          m.key = key;
          m.valid = true;
        }
        std::memcpy(dst, &m.bits, 2);
        return;
      }
      default: {
        if (!(std::fabs(v) < 9.0e15) || v != std::floor(v)) {
          storeFromDouble(buf, i, t_, v);  // not a small integer: the general path
          return;
        }
        const uint64_t bits = static_cast<uint64_t>(static_cast<int64_t>(v));  // wraps below
        std::memcpy(dst, &bits, size_);  // little-endian: the low bytes
        return;
      }
    }
  }

 private:
  static constexpr size_t kMemo = 1021;
  struct Memo {
    uint64_t key = 0;
    uint16_t bits = 0;
    bool valid = false;
  };
  DType t_;
  size_t size_;
  Memo memo_[kMemo];
};

/// Every rank's input (inputValue) for one signedness, and the references built from it.
class Inputs {
 public:
  Inputs(int nranks, bool isSigned, int seed, size_t period)
      : nranks_(nranks), seed_(seed), period_(std::max<size_t>(period, 1)) {
    const DType rep = isSigned ? DType::kInt8 : DType::kUint8;  // only signedness matters
    v_.resize(size_t(nranks_) * period_);
    for (int r = 0; r < nranks_; r++) {
      for (size_t j = 0; j < period_; j++)
        v_[r * period_ + j] = int8_t(inputValue(j, rep, r, seed));
    }
  }

  int nranks() const { return nranks_; }
  int seed() const { return seed_; }
  size_t period() const { return period_; }
  int value(int rank, size_t i) const { return v_[rank * period_ + i % period_]; }

  /// Rank `rank`'s input elements [offset, offset+count) in type t (as fillInput writes them).
  void fill(void* out, DType t, int rank, size_t offset, size_t count) const {
    FastStore store(t);
    tilePeriodic(out, dtypeSize(t), offset, count, period_, [&](void* dst, size_t j, size_t n) {
      const int8_t* src = &v_[rank * period_ + j];
      for (size_t i = 0; i < n; i++) store(dst, i, src[i]);
    });
  }

  /// The reduction over all ranks of elements [offset, offset+count), in type t.
  void reduce(void* out, DType t, const OpSpec& op, size_t offset, size_t count) const {
    if (op.kind == OpSpec::Kind::kBuiltin && count <= kHarnessRefMaxCount &&
        offset + count <= period_) {
      referenceReduce(out, count, t, op.builtin, nranks_, seed_, offset);
      return;
    }
    reduceModel(out, t, op, offset, count);
  }

  /// The same from the table alone (never through referenceReduce).
  void reduceModel(void* out, DType t, const OpSpec& op, size_t offset, size_t count) const {
    // Pre-multiplied values: the rank's input times the scalar, rounded to the type, for each
    // of the inputs' eleven possible values -5..5.
    const bool preMul = op.isPreMul() || (op.builtin == RedOp::kAvg && isFloat(t));
    const double s = preMul ? scalarOf(op, t) : 1;
    double scaled[11];
    for (int v = -5; v <= 5; v++) {
      scaled[v + 5] = isFloat(t) ? roundToType(v * s, t) : double(int64_t(v) * int64_t(s));
    }
    FastStore store(t);
    tilePeriodic(out, dtypeSize(t), offset, count, period_, [&](void* dst, size_t j0, size_t n) {
      for (size_t i = 0; i < n; i++) store(dst, i, element(j0 + i, t, op, preMul, scaled));
    });
  }

  /// fill() and reduce() into a buffer this object keeps: a sweep asks for the same data
  /// several times in a row (in place and out of place, several roots), and at 1 Mi elements
  /// computing it is most of a case's run time. Valid until the next call of the same kind.
  const std::vector<char>& filled(DType t, int rank, size_t offset, size_t count) const {
    const std::string key = "fill " + std::to_string(int(t)) + " " + std::to_string(rank) + " " +
                            std::to_string(offset) + " " + std::to_string(count);
    if (key != fillKey_) {
      fillMemo_.resize(count * dtypeSize(t));
      fill(fillMemo_.data(), t, rank, offset, count);
      fillKey_ = key;
    }
    return fillMemo_;
  }
  const std::vector<char>& reduced(DType t, const OpSpec& op, size_t offset, size_t count) const {
    const std::string key = "reduce " + std::to_string(int(t)) + " " + op.name() + " " +
                            std::to_string(op.scalar) + " " + std::to_string(offset) + " " +
                            std::to_string(count);
    if (key != reduceKey_) {
      reduceMemo_.resize(count * dtypeSize(t));
      reduce(reduceMemo_.data(), t, op, offset, count);
      reduceKey_ = key;
    }
    return reduceMemo_;
  }

  /// The relative tolerance (as compare() takes it) for op on type t.
  double tolerance(DType t, const OpSpec& op) const {
    if (!isFloat(t)) return 0;
    if (op.kind == OpSpec::Kind::kBuiltin && op.builtin != RedOp::kAvg) {
      return test::tolerance(t, op.builtin, nranks_);
    }
    if (op.isPreMul() && op.exact) return 0;
    const bool powerOfTwo = (nranks_ & (nranks_ - 1)) == 0;
    if (!op.isPreMul() && powerOfTwo && nranks_ <= kMaxExactRanks) return 0;  // 1/n is exact
    // n-1 additions, each rounding a partial sum of magnitude <= 18|s| (the harness's bound on
    // the sum of the inputs' magnitudes) by at most u; plus the reference's own final rounding.
    // Doubled: the library rounds 1/n through float first, and the bound is not tight anyway.
    const double u = unitRoundoff(t);
    const double s = std::fabs(scalarOf(op, t));
    return 2 * u * ((nranks_ - 1) * 18 * s + 1);
  }

  /// The scalar premulsum applies, in type t (float avg: 1/nranks).
  double scalarOf(const OpSpec& op, DType t) const {
    if (op.isPreMul()) return roundToType(op.scalar, t);
    return roundToType(1.0 / nranks_, t);
  }

 private:
  static double unitRoundoff(DType t) {
    switch (t) {
      case DType::kFloat16:
        return std::ldexp(1.0, -11);
      case DType::kBfloat16:
        return std::ldexp(1.0, -8);
      case DType::kFloat32:
        return std::ldexp(1.0, -24);
      case DType::kFloat64:
        return std::ldexp(1.0, -53);
      default:
        return 0;
    }
  }

  /// Element j (of the period) of the reduction, as a double that storeFromDouble rounds
  /// (floats) or wraps (integers) into the type.
  double element(size_t j, DType t, const OpSpec& op, bool preMul, const double* scaled) const {
    if (preMul) {
      double acc = 0;  // exact: at most 8 terms of a few significant bits each
      for (int r = 0; r < nranks_; r++) acc += scaled[v_[r * period_ + j] + 5];
      return acc;
    }
    int64_t acc = v_[j];
    for (int r = 1; r < nranks_; r++) {
      const int64_t x = v_[r * period_ + j];
      switch (op.builtin) {
        case RedOp::kSum:
        case RedOp::kAvg:
          acc += x;
          break;
        case RedOp::kProd:
          acc *= x;
          break;
        case RedOp::kMax:
          acc = std::max(acc, x);
          break;
        case RedOp::kMin:
          acc = std::min(acc, x);
          break;
      }
    }
    // Integer avg: the sum, then one C division (truncation toward zero), as NCCL does.
    if (op.builtin == RedOp::kAvg) acc /= nranks_;
    return double(acc);
  }

  int nranks_;
  int seed_;
  size_t period_;
  std::vector<int8_t> v_;  // rank-major: v_[rank * period_ + j]
  mutable std::string fillKey_, reduceKey_;
  mutable std::vector<char> fillMemo_, reduceMemo_;
};

}  // namespace ring
}  // namespace test
}  // namespace tccl

#endif  // TCCL_TESTS_RING_RING_INPUTS_H_
