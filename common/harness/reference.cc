/*
 * common/harness/reference.cc: deterministic inputs, CPU references and result checking.
 *
 * What it is: the "simple reference next to the fast version" of every collective test. Each
 * rank fills its buffers with fillInput(rank, seed); the expected result of a reduction over
 * ranks is computed here from the same function, without any communication, and compared
 * element by element with what tccl produced.
 *
 * The input scheme (why it is exact). Element i of rank r has magnitude kSlotMagnitude[slot],
 * where slot = (a*r + h) mod 8 with h a hash of (seed, i) and a an odd number taken from h. For
 * fixed i this is a bijection of ranks 0..7 onto the eight slots, so any set of at most 8 ranks
 * holds each slot at most once, and:
 *    sum of magnitudes  <= 1+2+3+4+5+1+1+1 = 18
 *    prod of magnitudes <= 1*2*3*4*5*1*1*1 = 120  (fits int8 and uint8)
 * Signed and floating types also get a sign from a hash of (seed, i, r); unsigned types never
 * go negative. Every partial sum and partial product, in any order, is then an integer of
 * magnitude <= 120, exactly representable in every type including float16 and bfloat16 (8
 * significant bits hold any integer up to 256). So for nranks <= kMaxExactRanks (8):
 *  - sum, prod, max, min are exact in every type, whatever order an algorithm reduces in;
 *  - avg of integers is exact: the sum divided by nranks, truncated toward zero (C division),
 *    which is NCCL's ncclAvg for integers (sum, then divide);
 *  - avg of floats is exact when nranks is a power of two; otherwise the result depends on
 *    whether an implementation divides at the end or pre-multiplies each input by a rounded
 *    1/nranks (NCCL does the latter), so the reference gives the correctly rounded sum/nranks
 *    and tolerance() bounds the difference.
 * Beyond 8 ranks two ranks share a slot. Integer references are still exact because they are
 * computed in the type's own wrap-around arithmetic (through uint64), which is what a correct
 * implementation produces; float references may then need a tolerance (see tolerance()).
 *
 * Poison: an 8-byte pattern, phased by address so that it reads the same for every element
 * whatever the buffer offset: NaN in every floating type, and in the integer types values no
 * reduction of inputs can give (int8 -127/127, uint8 129/127, large int32/int64), except one
 * int8 byte in eight (0xF0 = -16) which an int8 sum of 8 ranks could in theory reach.
 *
 * NCCL counterpart: nccl-tests src/common.cu (InitData, CheckData) in spirit.
 * Added in: foundation (common/).
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace {

constexpr int kSlotMagnitude[8] = {1, 2, 3, 4, 5, 1, 1, 1};
constexpr double kMaxMagnitude = 5;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool isSigned(DType t) {
  return t == DType::kInt8 || t == DType::kInt32 || t == DType::kInt64 || isFloat(t);
}

// Unit roundoff (half an ulp of 1) of a floating type.
double unitRoundoff(DType t) {
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

// Integer element i of buf, sign-extended (signed types) or zero-extended, as uint64 bits.
uint64_t loadIntBits(const void* buf, size_t i, DType t) {
  const char* p = static_cast<const char*>(buf) + i * dtypeSize(t);
  switch (t) {
    case DType::kInt8: {
      int8_t v;
      std::memcpy(&v, p, 1);
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
    case DType::kUint8: {
      uint8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<uint64_t>(static_cast<int64_t>(v));
    }
    case DType::kUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

// Stores the low bytes of `bits` (little-endian, as on every machine we build for).
void storeIntBits(void* buf, size_t i, DType t, uint64_t bits) {
  const size_t size = dtypeSize(t);
  std::memcpy(static_cast<char*>(buf) + i * size, &bits, size);
}

// Sign-extends the low `bytes` bytes of x.
int64_t signExtend(uint64_t x, size_t bytes) {
  if (bytes == 8) return static_cast<int64_t>(x);
  const int shift = 64 - 8 * static_cast<int>(bytes);
  return static_cast<int64_t>(x << shift) >> shift;
}

uint64_t truncateBits(uint64_t x, size_t bytes) {
  return bytes == 8 ? x : x & ((uint64_t(1) << (8 * bytes)) - 1);
}

// One element of an integer reduction, in the type's wrap-around arithmetic.
uint64_t reduceInt(size_t idx, DType t, RedOp op, int nranks, int seed) {
  const size_t bytes = dtypeSize(t);
  const bool sgn = isSigned(t);
  auto value = [&](int r) { return static_cast<uint64_t>(int64_t{inputValue(idx, t, r, seed)}); };
  auto less = [&](uint64_t a, uint64_t b) {
    return sgn ? signExtend(a, bytes) < signExtend(b, bytes)
               : truncateBits(a, bytes) < truncateBits(b, bytes);
  };
  uint64_t acc = value(0);
  for (int r = 1; r < nranks; r++) {
    const uint64_t v = value(r);
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg:
        acc += v;  // unsigned: wraps mod 2^64, hence mod 2^(8*bytes) after truncation
        break;
      case RedOp::kProd:
        acc *= v;
        break;
      case RedOp::kMax:
        if (less(acc, v)) acc = v;
        break;
      case RedOp::kMin:
        if (less(v, acc)) acc = v;
        break;
    }
  }
  if (op == RedOp::kAvg) {
    // The sum as the type holds it, then C division (truncation toward zero).
    if (sgn) return static_cast<uint64_t>(signExtend(acc, bytes) / nranks);
    return truncateBits(acc, bytes) / static_cast<uint64_t>(nranks);
  }
  return acc;
}

double reduceFloat(size_t idx, DType t, RedOp op, int nranks, int seed) {
  double acc = inputValue(idx, t, 0, seed);
  for (int r = 1; r < nranks; r++) {
    const double v = inputValue(idx, t, r, seed);
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg:
        acc += v;
        break;
      case RedOp::kProd:
        acc *= v;
        break;
      case RedOp::kMax:
        acc = std::fmax(acc, v);
        break;
      case RedOp::kMin:
        acc = std::fmin(acc, v);
        break;
    }
  }
  return op == RedOp::kAvg ? acc / nranks : acc;  // double: exact sum, one rounding on store
}

std::string describe(const void* buf, size_t i, DType t) {
  char text[96];
  if (!isFloat(t)) {
    const uint64_t bits = loadIntBits(buf, i, t);
    if (isSigned(t)) {
      std::snprintf(text, sizeof text, "%lld", static_cast<long long>(bits));
    } else {
      std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(bits));
    }
  } else if (dtypeSize(t) == 2) {
    uint16_t bits;
    std::memcpy(&bits, static_cast<const char*>(buf) + 2 * i, 2);
    std::snprintf(text, sizeof text, "%.9g (bits 0x%04x)", loadAsDouble(buf, i, t), bits);
  } else {
    std::snprintf(text, sizeof text, "%.17g", loadAsDouble(buf, i, t));
  }
  return text;
}

}  // namespace

int inputValue(size_t i, DType t, int rank, int seed) {
  const uint64_t h = splitmix64(splitmix64(static_cast<uint32_t>(seed)) + i);
  const uint64_t a = 2 * ((h >> 3) & 3) + 1;  // odd, so r -> a*r + h is a bijection mod 8
  const int slot = static_cast<int>((a * static_cast<uint64_t>(rank) + h) & 7);
  const int magnitude = kSlotMagnitude[slot];
  if (!isSigned(t)) return magnitude;
  const uint64_t s = splitmix64(h ^ (0x632be59bd9b4e019ull * (static_cast<uint64_t>(rank) + 1)));
  return (s >> 17) & 1 ? -magnitude : magnitude;
}

void fillInput(void* buf, size_t count, DType t, int rank, int seed) {
  for (size_t i = 0; i < count; i++) {
    const int v = inputValue(i, t, rank, seed);
    if (isFloat(t)) {
      storeFromDouble(buf, i, t, v);
    } else {
      storeIntBits(buf, i, t, static_cast<uint64_t>(int64_t{v}));
    }
  }
}

void fillPoison(void* buf, size_t bytes) {
  static constexpr uint8_t kPattern[8] = {0x81, 0x7f, 0x81, 0x7f, 0x81, 0x7f, 0xf0, 0x7f};
  uint8_t* p = static_cast<uint8_t*>(buf);
  const uintptr_t phase = reinterpret_cast<uintptr_t>(buf) & 7;
  for (size_t i = 0; i < bytes; i++) p[i] = kPattern[(phase + i) & 7];
}

void referenceReduce(void* out, size_t count, DType t, RedOp op, int nranks, int seed,
                     size_t offset) {
  for (size_t i = 0; i < count; i++) {
    if (isFloat(t)) {
      storeFromDouble(out, i, t, reduceFloat(offset + i, t, op, nranks, seed));
    } else {
      storeIntBits(out, i, t, reduceInt(offset + i, t, op, nranks, seed));
    }
  }
}

double tolerance(DType t, RedOp op, int nranks) {
  if (!isFloat(t) || op == RedOp::kMax || op == RedOp::kMin || nranks <= 1) return 0;
  const double u = unitRoundoff(t);
  if (op == RedOp::kAvg) {
    const bool powerOfTwo = (nranks & (nranks - 1)) == 0;
    if (powerOfTwo && nranks <= kMaxExactRanks) return 0;  // 1/n exact, every step exact
    // Pre-multiplying by a rounded 1/n: n products and n-1 additions, each off by at most u
    // relative to a partial result of magnitude <= kMaxMagnitude, plus the reference's own
    // rounding. Relative to max(|expected|, 1) (see compare()).
    return (nranks + 2) * kMaxMagnitude * u;
  }
  if (nranks <= kMaxExactRanks) return 0;  // exact by construction (see the file header)
  return nranks * u;
}

bool compare(const void* got, const void* expected, size_t count, DType t, double relTol,
             std::string* why) {
  size_t bad = 0;
  size_t first = 0;
  for (size_t i = 0; i < count; i++) {
    bool ok;
    if (!isFloat(t)) {
      ok = loadIntBits(got, i, t) == loadIntBits(expected, i, t);
    } else {
      const double g = loadAsDouble(got, i, t);
      const double e = loadAsDouble(expected, i, t);
      if (std::isnan(e) || std::isnan(g)) {
        ok = std::isnan(e) && std::isnan(g);
      } else if (std::isinf(e) || std::isinf(g)) {
        ok = g == e;
      } else {
        ok = std::fabs(g - e) <= relTol * std::fmax(std::fabs(e), 1.0);
      }
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return true;
  if (why != nullptr) {
    char text[128];
    std::snprintf(text, sizeof text, "%zu of %zu %s elements differ; first at index %zu: got ", bad,
                  count, dtypeName(t), first);
    *why = text + describe(got, first, t) + ", expected " + describe(expected, first, t);
    if (relTol > 0) {
      std::snprintf(text, sizeof text, " (relative tolerance %g)", relTol);
      *why += text;
    }
  }
  return false;
}

}  // namespace test
}  // namespace tccl
