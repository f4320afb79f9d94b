/*
 * common/harness/dtype.cc: the ten element types and the five reductions, as the tests see them.
 *
 * What it is: names, sizes, and conversions between any element type and double. float16 and
 * bfloat16 are converted by hand (no CUDA headers, so the harness builds on the CPU-only CI
 * machine and gives the same bits there as on a GPU machine).
 *
 * Invariants:
 *  - storeFromDouble rounds to nearest, ties to even, for every floating type: float16 and
 *    bfloat16 directly from double (never through float, which would round twice), float32 by
 *    the compiler's conversion (the FPU default, round-to-nearest-even). Overflow gives +-inf,
 *    values below half the smallest subnormal give +-0, NaN stays NaN (quiet, sign kept).
 *  - Integer types: the double is truncated toward zero into int64 (saturating at the int64
 *    range, NaN -> 0), then wrapped to the type's width (two's complement), which is what the
 *    reference's wrap-around integer arithmetic needs.
 *  - Every load/store goes through memcpy: buffers need not be aligned for the type.
 *
 * NCCL counterpart: none directly; nccl-tests src/common.cu converts with cuda_fp16.h.
 * Added in: foundation (common/).
 */
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tccl_test/harness.h"

namespace tccl {
namespace test {

std::vector<DType> allDTypes() {
  std::vector<DType> all;
  for (int t = 0; t < kNumDTypes; t++) all.push_back(static_cast<DType>(t));
  return all;
}

size_t dtypeSize(DType t) {
  switch (t) {
    case DType::kInt8:
    case DType::kUint8:
      return 1;
    case DType::kFloat16:
    case DType::kBfloat16:
      return 2;
    case DType::kInt32:
    case DType::kUint32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kUint64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

const char* dtypeName(DType t) {
  static const char* const kNames[kNumDTypes] = {"int8",    "uint8",   "int32",   "uint32",
                                                 "int64",   "uint64",  "float16", "float32",
                                                 "float64", "bfloat16"};
  int i = static_cast<int>(t);
  return (i >= 0 && i < kNumDTypes) ? kNames[i] : "invalid-dtype";
}

bool isFloat(DType t) {
  return t == DType::kFloat16 || t == DType::kFloat32 || t == DType::kFloat64 ||
         t == DType::kBfloat16;
}

std::vector<RedOp> allRedOps() {
  return {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};
}

const char* redOpName(RedOp op) {
  switch (op) {
    case RedOp::kSum:
      return "sum";
    case RedOp::kProd:
      return "prod";
    case RedOp::kMax:
      return "max";
    case RedOp::kMin:
      return "min";
    case RedOp::kAvg:
      return "avg";
  }
  return "invalid-op";
}

namespace {

// A binary floating format narrower than double: `expBits` exponent bits, `manBits` stored
// mantissa bits, sign on top. float16 is (5, 10), bfloat16 is (8, 7).
struct NarrowFormat {
  int expBits;
  int manBits;
};
constexpr NarrowFormat kHalf{5, 10};
constexpr NarrowFormat kBf16{8, 7};

// double -> narrow format, round to nearest, ties to even. The value is split into an integer
// significand m (53 bits, implicit one included) and exponent e, so that |v| = m * 2^(e-52);
// m is shifted right until its last bit is worth one unit in the last place of the target
// (which is fixed at the smallest normal exponent for subnormal results), and the shifted-out
// bits decide the rounding. Adding the rounded significand to the biased exponent field lets a
// carry out of the mantissa bump the exponent, and the largest finite value carry into inf.
uint16_t narrowFromDouble(double v, NarrowFormat f) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 63) << (f.expBits + f.manBits));
  const uint16_t expAllOnes = static_cast<uint16_t>(((1u << f.expBits) - 1) << f.manBits);
  if (std::isnan(v)) return sign | expAllOnes | static_cast<uint16_t>(1u << (f.manBits - 1));
  if (std::isinf(v)) return sign | expAllOnes;
  const int dexp = static_cast<int>((bits >> 52) & 0x7ff);
  if (dexp == 0) return sign;  // zero or a double subnormal: far below any narrow subnormal
  const uint64_t m = (bits & ((uint64_t(1) << 52) - 1)) | (uint64_t(1) << 52);
  const int e = dexp - 1023;
  const int bias = (1 << (f.expBits - 1)) - 1;
  const int emin = 1 - bias;  // exponent of the smallest normal number
  const int shift = 52 - f.manBits + (e < emin ? emin - e : 0);
  if (shift > 54) return sign;  // below half the smallest subnormal: rounds to zero
  uint64_t q = m >> shift;
  const uint64_t rem = m & ((uint64_t(1) << shift) - 1);
  const uint64_t half = uint64_t(1) << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  uint64_t out;
  if (e >= emin) {
    out = (static_cast<uint64_t>(e + bias) << f.manBits) + q - (uint64_t(1) << f.manBits);
  } else {
    out = q;  // subnormal; q == 2^manBits encodes the smallest normal, as it should
  }
  if (out >= expAllOnes) return sign | expAllOnes;  // overflow: inf
  return sign | static_cast<uint16_t>(out);
}

double doubleFromNarrow(uint16_t h, NarrowFormat f) {
  const int bias = (1 << (f.expBits - 1)) - 1;
  const bool negative = (h >> (f.expBits + f.manBits)) & 1;
  const int exp = (h >> f.manBits) & ((1 << f.expBits) - 1);
  const int man = h & ((1 << f.manBits) - 1);
  double v;
  if (exp == (1 << f.expBits) - 1) {
    v = man ? std::nan("") : INFINITY;
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - bias - f.manBits);  // subnormal or zero
  } else {
    v = std::ldexp(static_cast<double>(man | (1 << f.manBits)), exp - bias - f.manBits);
  }
  return negative ? -v : v;
}

template <typename T>
T loadRaw(const void* buf, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void storeRaw(void* buf, size_t i, T v) {
  std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

// Truncate toward zero into int64, saturating; the caller wraps to its width.
int64_t truncToInt64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(v);
}

}  // namespace

uint16_t toHalfBits(double v) { return narrowFromDouble(v, kHalf); }
double fromHalfBits(uint16_t h) { return doubleFromNarrow(h, kHalf); }
uint16_t toBf16Bits(double v) { return narrowFromDouble(v, kBf16); }
double fromBf16Bits(uint16_t h) { return doubleFromNarrow(h, kBf16); }

double loadAsDouble(const void* buf, size_t i, DType t) {
  switch (t) {
    case DType::kInt8:
      return loadRaw<int8_t>(buf, i);
    case DType::kUint8:
      return loadRaw<uint8_t>(buf, i);
    case DType::kInt32:
      return loadRaw<int32_t>(buf, i);
    case DType::kUint32:
      return loadRaw<uint32_t>(buf, i);
    case DType::kInt64:
      return static_cast<double>(loadRaw<int64_t>(buf, i));
    case DType::kUint64:
      return static_cast<double>(loadRaw<uint64_t>(buf, i));
    case DType::kFloat16:
      return fromHalfBits(loadRaw<uint16_t>(buf, i));
    case DType::kFloat32:
      return loadRaw<float>(buf, i);
    case DType::kFloat64:
      return loadRaw<double>(buf, i);
    case DType::kBfloat16:
      return fromBf16Bits(loadRaw<uint16_t>(buf, i));
  }
  return std::nan("");
}

void storeFromDouble(void* buf, size_t i, DType t, double v) {
  // Integers: two's-complement wrap through uint64 (well defined, unlike a narrowing cast of a
  // signed value that does not fit).
  const uint64_t wrapped = static_cast<uint64_t>(truncToInt64(v));
  switch (t) {
    case DType::kInt8:
    case DType::kUint8:
      storeRaw<uint8_t>(buf, i, static_cast<uint8_t>(wrapped));
      return;
    case DType::kInt32:
    case DType::kUint32:
      storeRaw<uint32_t>(buf, i, static_cast<uint32_t>(wrapped));
      return;
    case DType::kInt64:
    case DType::kUint64:
      storeRaw<uint64_t>(buf, i, wrapped);
      return;
    case DType::kFloat16:
      storeRaw<uint16_t>(buf, i, toHalfBits(v));
      return;
    case DType::kFloat32:
      storeRaw<float>(buf, i, static_cast<float>(v));
      return;
    case DType::kFloat64:
      storeRaw<double>(buf, i, v);
      return;
    case DType::kBfloat16:
      storeRaw<uint16_t>(buf, i, toBf16Bits(v));
      return;
  }
}

}  // namespace test
}  // namespace tccl
