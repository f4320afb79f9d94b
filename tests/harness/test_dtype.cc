/*
 * tests/harness/test_dtype.cc: unit tests of the harness's element types and conversions.
 *
 * What it is: the float16/bfloat16 conversions every floating reference goes through, checked
 * against known bit patterns (ones, limits, subnormals, inf, NaN), the round-to-nearest-even
 * rule at every kind of tie (normal, subnormal, overflow to inf, double rounding avoided), an
 * exhaustive round trip of all 65536 patterns of both formats, and the integer wrap/truncation
 * rules of storeFromDouble.
 *
 * Invariants: single-process; part of the test_harness program (with test_harness.cc).
 *
 * NCCL counterpart: none (cuda_fp16.h / cuda_bf16.h do these conversions on the GPU).
 * Added in: foundation (tests/).
 */
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace {

// ---- float16 / bfloat16 -------------------------------------------------------------------

TEST(HalfTest, KnownBitPatterns) {
  EXPECT_EQ(toHalfBits(0.0), 0x0000);
  EXPECT_EQ(toHalfBits(-0.0), 0x8000);
  EXPECT_EQ(toHalfBits(1.0), 0x3c00);
  EXPECT_EQ(toHalfBits(-2.0), 0xc000);
  EXPECT_EQ(toHalfBits(0.5), 0x3800);
  EXPECT_EQ(toHalfBits(120.0), 0x5780);
  EXPECT_EQ(toHalfBits(65504.0), 0x7bff);               // largest finite
  EXPECT_EQ(toHalfBits(std::ldexp(1.0, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(toHalfBits(std::ldexp(1.0, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(toHalfBits(std::ldexp(1023.0, -24)), 0x03ff);
  EXPECT_EQ(toHalfBits(INFINITY), 0x7c00);
  EXPECT_EQ(toHalfBits(-INFINITY), 0xfc00);
  const uint16_t nan = toHalfBits(std::nan(""));
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_DOUBLE_EQ(fromHalfBits(0x3555), 0.333251953125);
  EXPECT_DOUBLE_EQ(fromHalfBits(0x0001), std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isinf(fromHalfBits(0xfc00)) && fromHalfBits(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(fromHalfBits(0x7e00)));
}

TEST(HalfTest, RoundsToNearestTiesToEven) {
  const double ulp1 = std::ldexp(1.0, -10);              // spacing just above 1
  EXPECT_EQ(toHalfBits(1.0 + ulp1 / 2), 0x3c00);         // tie, 0x3c00 is even
  EXPECT_EQ(toHalfBits(1.0 + 3 * ulp1 / 2), 0x3c02);     // tie, 0x3c02 is even
  EXPECT_EQ(toHalfBits(1.0 + ulp1 / 2 + 1e-9), 0x3c01);  // just above the tie
  EXPECT_EQ(toHalfBits(1.0 + ulp1 / 2 - 1e-9), 0x3c00);  // just below
  EXPECT_EQ(toHalfBits(65519.0), 0x7bff);                // below the overflow tie
  EXPECT_EQ(toHalfBits(65520.0), 0x7c00);                // tie with 65536: even is inf
  EXPECT_EQ(toHalfBits(std::ldexp(1.0, -25)), 0x0000);   // tie with 0: even is 0
  EXPECT_EQ(toHalfBits(std::ldexp(1.0, -25) * 1.0000001), 0x0001);
  EXPECT_EQ(toHalfBits(std::ldexp(3.0, -25)), 0x0002);     // tie between 1 and 2 subnormals
  EXPECT_EQ(toHalfBits(std::ldexp(2047.0, -25)), 0x0400);  // max subnormal + half: carries
  EXPECT_EQ(toHalfBits(std::ldexp(1.0, -26)), 0x0000);
  EXPECT_EQ(toHalfBits(-std::ldexp(1.0, -26)), 0x8000);  // sign survives underflow
  EXPECT_EQ(toHalfBits(1e300), 0x7c00);
  EXPECT_EQ(toHalfBits(1e-300), 0x0000);
}

TEST(Bf16Test, KnownBitPatterns) {
  EXPECT_EQ(toBf16Bits(0.0), 0x0000);
  EXPECT_EQ(toBf16Bits(-0.0), 0x8000);
  EXPECT_EQ(toBf16Bits(1.0), 0x3f80);
  EXPECT_EQ(toBf16Bits(-2.0), 0xc000);
  EXPECT_EQ(toBf16Bits(120.0), 0x42f0);
  EXPECT_EQ(toBf16Bits(std::ldexp(1.0, -126)), 0x0080);   // smallest normal
  EXPECT_EQ(toBf16Bits(std::ldexp(1.0, -133)), 0x0001);   // smallest subnormal
  EXPECT_EQ(toBf16Bits(std::ldexp(255.0, 120)), 0x7f7f);  // largest finite
  EXPECT_EQ(toBf16Bits(INFINITY), 0x7f80);
  EXPECT_EQ(toBf16Bits(-INFINITY), 0xff80);
  const uint16_t nan = toBf16Bits(-std::nan(""));
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_DOUBLE_EQ(fromBf16Bits(0x3eab), 0.333984375);
  EXPECT_TRUE(std::isnan(fromBf16Bits(0x7fc0)));
}

TEST(Bf16Test, RoundsToNearestTiesToEven) {
  const double ulp1 = std::ldexp(1.0, -7);
  EXPECT_EQ(toBf16Bits(1.0 + ulp1 / 2), 0x3f80);
  EXPECT_EQ(toBf16Bits(1.0 + 3 * ulp1 / 2), 0x3f82);
  EXPECT_EQ(toBf16Bits(1.0 + ulp1 / 2 + 1e-9), 0x3f81);
  EXPECT_EQ(toBf16Bits(257.0), 0x4380);                   // tie 256/258: 256 is even
  EXPECT_EQ(toBf16Bits(259.0), 0x4382);                   // tie 258/260: 260 is even
  EXPECT_EQ(toBf16Bits(std::ldexp(511.0, 119)), 0x7f80);  // tie with 2^128: even is inf
  EXPECT_EQ(toBf16Bits(std::ldexp(1.0, -134)), 0x0000);   // tie with 0
  EXPECT_EQ(toBf16Bits(std::ldexp(3.0, -134)), 0x0002);
  // Directly from double, not through float: 1 + 2^-8 + 2^-30 is above the tie, but the
  // float nearest to it is exactly the tie, which would round down.
  EXPECT_EQ(toBf16Bits(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30)), 0x3f81);
}

// Every finite pattern converts to a double and back to itself; NaNs stay NaN.
TEST(HalfTest, ExhaustiveRoundTrip) {
  for (uint32_t b = 0; b <= 0xffff; b++) {
    const uint16_t h = static_cast<uint16_t>(b);
    const double d = fromHalfBits(h);
    if (std::isnan(d)) {
      EXPECT_TRUE(std::isnan(fromHalfBits(toHalfBits(d)))) << std::hex << b;
    } else {
      ASSERT_EQ(toHalfBits(d), h) << std::hex << b;
    }
    const double e = fromBf16Bits(h);
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(fromBf16Bits(toBf16Bits(e)))) << std::hex << b;
    } else {
      ASSERT_EQ(toBf16Bits(e), h) << std::hex << b;
      // bfloat16 is the top half of a float32: the value must agree.
      uint32_t f32 = uint32_t{h} << 16;
      float f;
      std::memcpy(&f, &f32, 4);
      ASSERT_EQ(static_cast<double>(f), e) << std::hex << b;
    }
  }
}

TEST(DTypeTest, NamesSizesAndStores) {
  EXPECT_EQ(allDTypes().size(), size_t{kNumDTypes});
  EXPECT_EQ(allRedOps().size(), 5u);
  EXPECT_STREQ(dtypeName(DType::kBfloat16), "bfloat16");
  EXPECT_STREQ(redOpName(RedOp::kAvg), "avg");
  EXPECT_EQ(dtypeSize(DType::kFloat16), 2u);
  EXPECT_EQ(dtypeSize(DType::kUint64), 8u);
  EXPECT_TRUE(isFloat(DType::kBfloat16));
  EXPECT_FALSE(isFloat(DType::kInt64));
  EXPECT_EQ(static_cast<int>(DType::kBfloat16), 9);  // tcclBfloat16
  EXPECT_EQ(static_cast<int>(RedOp::kAvg), 4);       // tcclAvg

  unsigned char buf[8 * 4] = {};
  for (DType t : allDTypes()) {
    storeFromDouble(buf, 3, t, -3.0);
    const double back = loadAsDouble(buf, 3, t);
    if (t == DType::kUint8)
      EXPECT_EQ(back, 253) << dtypeName(t);  // wraps
    else if (t == DType::kUint32)
      EXPECT_EQ(back, 4294967293.0) << dtypeName(t);
    else if (t == DType::kUint64)
      EXPECT_EQ(back, 18446744073709551613.0) << dtypeName(t);
    else
      EXPECT_EQ(back, -3) << dtypeName(t);
  }
  storeFromDouble(buf, 0, DType::kInt8, 200);
  EXPECT_EQ(loadAsDouble(buf, 0, DType::kInt8), -56);  // 200 - 256
  storeFromDouble(buf, 0, DType::kInt32, -2.9);
  EXPECT_EQ(loadAsDouble(buf, 0, DType::kInt32), -2);  // truncation toward zero
  storeFromDouble(buf, 0, DType::kFloat32, 1.0 / 3);
  EXPECT_EQ(loadAsDouble(buf, 0, DType::kFloat32), static_cast<double>(1.0f / 3));
}

}  // namespace
}  // namespace test
}  // namespace tccl
