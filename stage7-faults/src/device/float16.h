/*
 * device/float16.h: the two 16-bit floating-point element types, float16 and bfloat16.
 *
 * What it is: small value types holding the 16 raw bits, with conversions to and from float
 * (round to nearest, ties to even; NaN stays NaN) and the arithmetic the reductions need,
 * each done in float and rounded back. The same code runs on the host and in kernels.
 *
 * The accuracy rule (the one NCCL follows): every reduction step rounds its result to the
 * element type. A sum over n ranks in float16/bfloat16 therefore carries up to n-1 roundings,
 * each at most half an ulp of the partial result. What the tests accept for each type and op
 * (exact where the inputs make rounding impossible) is stated in docs/chapters/stage2-ring.md
 * and implemented by tolerance() in common/harness/reference.cc.
 *
 * Invariants: sizeof == 2 and trivially copyable, so a buffer of them is a buffer of uint16_t;
 * no arithmetic is done directly on the 16-bit patterns.
 *
 * NCCL counterpart: CUDA's __half / __nv_bfloat16 as used in src/device/reduce_kernel.h.
 * Added in: stage 2.
 */
#ifndef TCCL_DEVICE_FLOAT16_H_
#define TCCL_DEVICE_FLOAT16_H_

#include <cstdint>
#include <cstring>

#include "device/fifo.h"

namespace tccl {

TCCL_HOST_DEVICE inline uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
TCCL_HOST_DEVICE inline float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/// IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits.
struct Half {
  uint16_t bits;

  TCCL_HOST_DEVICE static Half fromFloat(float f) {
    uint32_t u = floatBits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return Half{uint16_t(sign | 0x7e00u)};  // NaN
    if (absu >= 0x477ff000u) return Half{uint16_t(sign | 0x7c00u)};  // overflow (or inf)
    if (absu < 0x38800000u) {
      // Subnormal or zero in half: shift the mantissa (with its hidden bit) into place and
      // round to nearest even on the bits shifted out.
      if (absu < 0x33000000u) return Half{uint16_t(sign)};  // below half the smallest subnormal
      uint32_t e = absu >> 23, m = (absu & 0x7fffffu) | 0x800000u;
      uint32_t shift = 126 - e;  // 14 + (113 - e)
      uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (h & 1u))) h++;
      return Half{uint16_t(sign | h)};
    }
    // Normal: rebias the exponent (127 -> 15), keep 10 mantissa bits, round to nearest even.
    uint32_t h = ((absu - 0x38000000u) >> 13);
    uint32_t rem = absu & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return Half{uint16_t(sign | h)};
  }

  TCCL_HOST_DEVICE float toFloat() const {
    uint32_t sign = uint32_t(bits & 0x8000u) << 16;
    uint32_t e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    if (e == 0x1f) return bitsFloat(sign | 0x7f800000u | (m << 13));  // inf / NaN
    if (e == 0) {
      if (m == 0) return bitsFloat(sign);
      // Subnormal: value = m * 2^-24, exact in float.
      float v = float(m) * 5.9604644775390625e-08f;
      return sign ? -v : v;
    }
    return bitsFloat(sign | ((e + 112) << 23) | (m << 13));
  }
};

/// bfloat16: the top 16 bits of a float (1 sign, 8 exponent, 7 mantissa bits).
struct Bf16 {
  uint16_t bits;

  TCCL_HOST_DEVICE static Bf16 fromFloat(float f) {
    uint32_t u = floatBits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return Bf16{uint16_t((u >> 16) | 0x40u)};  // quiet NaN
    // Round to nearest even on the 16 bits dropped.
    u += 0x7fffu + ((u >> 16) & 1u);
    return Bf16{uint16_t(u >> 16)};
  }
  TCCL_HOST_DEVICE float toFloat() const { return bitsFloat(uint32_t(bits) << 16); }
};

static_assert(sizeof(Half) == 2 && sizeof(Bf16) == 2, "16-bit element types");

// Arithmetic for the reductions: computed in float, rounded once to the type.
#define TCCL_FLOAT16_OPS(T)                                                                   \
  TCCL_HOST_DEVICE inline T operator+(T a, T b) { return T::fromFloat(a.toFloat() + b.toFloat()); } \
  TCCL_HOST_DEVICE inline T operator*(T a, T b) { return T::fromFloat(a.toFloat() * b.toFloat()); } \
  TCCL_HOST_DEVICE inline bool operator<(T a, T b) { return a.toFloat() < b.toFloat(); }
TCCL_FLOAT16_OPS(Half)
TCCL_FLOAT16_OPS(Bf16)
#undef TCCL_FLOAT16_OPS

}  // namespace tccl

#endif  // TCCL_DEVICE_FLOAT16_H_
