/*
 * tests/harness/test_harness.cc: unit tests of the test harness itself (common/harness).
 *
 * What it is: every other test trusts the harness's references, so they are checked here
 * against hand-computed values and independent re-implementations: fillInput's scheme
 * (determinism, ranges, exactness of every reduction in any order), referenceReduce for every
 * type and op, tolerance(), compare(), the poison pattern and buffers. The conversions are
 * tested in test_dtype.cc.
 *
 * Invariants: single-process (run without mpirun; the harness main still initialises MPI).
 *
 * NCCL counterpart: none (nccl-tests does not test its own checker).
 * Added in: foundation (tests/).
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace {

// ---- inputs -------------------------------------------------------------------------------

TEST(InputTest, DeterministicAndVaried) {
  for (DType t : allDTypes()) {
    const size_t n = 1000;
    const size_t bytes = n * dtypeSize(t);
    std::vector<char> a(bytes), b(bytes), c(bytes), d(bytes);
    fillInput(a.data(), n, t, 2, 7);
    fillInput(b.data(), n, t, 2, 7);
    fillInput(c.data(), n, t, 2, 8);
    fillInput(d.data(), n, t, 3, 7);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), bytes), 0) << dtypeName(t);
    EXPECT_NE(std::memcmp(a.data(), c.data(), bytes), 0) << "seed ignored: " << dtypeName(t);
    EXPECT_NE(std::memcmp(a.data(), d.data(), bytes), 0) << "rank ignored: " << dtypeName(t);
    const bool sgn = isFloat(t) || t == DType::kInt8 || t == DType::kInt32 || t == DType::kInt64;
    bool sawNegative = false;
    for (size_t i = 0; i < n; i++) {
      const double v = loadAsDouble(a.data(), i, t);
      ASSERT_EQ(v, inputValue(i, t, 2, 7)) << dtypeName(t) << " " << i;
      ASSERT_TRUE(v != 0 && std::fabs(v) <= 5 && v == std::floor(v)) << v;
      sawNegative |= v < 0;
    }
    EXPECT_EQ(sawNegative, sgn) << dtypeName(t);
  }
}

// The file header of reference.cc: for each element, ranks 0..7 hold the eight slot magnitudes.
TEST(InputTest, EightRanksHoldEverySlotOnce) {
  for (int seed : {0, 1, 12345}) {
    for (size_t i = 0; i < 200; i++) {
      std::vector<int> mags;
      for (int r = 0; r < 8; r++) mags.push_back(std::abs(inputValue(i, DType::kInt32, r, seed)));
      std::sort(mags.begin(), mags.end());
      ASSERT_EQ(mags, (std::vector<int>{1, 1, 1, 1, 2, 3, 4, 5})) << "seed " << seed << " i " << i;
    }
  }
}

// ---- references ---------------------------------------------------------------------------

// Independent re-implementation: exact math in int64/double, then the type's rules.
double handReduce(size_t i, DType t, RedOp op, int nranks, int seed) {
  int64_t sum = 0, prod = 1, mx = INT64_MIN, mn = INT64_MAX;
  for (int r = 0; r < nranks; r++) {
    const int64_t v = inputValue(i, t, r, seed);
    sum += v;
    prod *= v;
    mx = std::max(mx, v);
    mn = std::min(mn, v);
  }
  switch (op) {
    case RedOp::kSum:
      return static_cast<double>(sum);
    case RedOp::kProd:
      return static_cast<double>(prod);
    case RedOp::kMax:
      return static_cast<double>(mx);
    case RedOp::kMin:
      return static_cast<double>(mn);
    case RedOp::kAvg:
      return isFloat(t) ? static_cast<double>(sum) / nranks : static_cast<double>(sum / nranks);
  }
  return 0;
}

TEST(ReferenceTest, EveryTypeAndOpMatchesHandComputation) {
  const size_t n = 64, offset = 5;
  for (int nranks = 1; nranks <= kMaxExactRanks; nranks++) {
    for (DType t : allDTypes()) {
      for (RedOp op : allRedOps()) {
        std::vector<char> out(n * dtypeSize(t)), want(n * dtypeSize(t));
        referenceReduce(out.data(), n, t, op, nranks, 3, offset);
        for (size_t i = 0; i < n; i++)
          storeFromDouble(want.data(), i, t, handReduce(i + offset, t, op, nranks, 3));
        std::string why;
        EXPECT_TRUE(compare(out.data(), want.data(), n, t, 0, &why))
            << dtypeName(t) << " " << redOpName(op) << " nranks " << nranks << ": " << why;
      }
    }
  }
}

TEST(ReferenceTest, IntegerAvgTruncatesTowardZero) {
  // Find an element of 3 ranks whose int8 sum is negative and not a multiple of 3.
  for (size_t i = 0; i < 1000; i++) {
    int sum = 0;
    for (int r = 0; r < 3; r++) sum += inputValue(i, DType::kInt8, r, 0);
    if (sum < 0 && sum % 3 != 0) {
      int8_t out[1];
      referenceReduce(out, 1, DType::kInt8, RedOp::kAvg, 3, 0, i);
      EXPECT_EQ(out[0], sum / 3) << "sum " << sum;  // e.g. -7/3 = -2, not -3
      EXPECT_GT(out[0] * 3, sum - 1);
      return;
    }
  }
  FAIL() << "no suitable element found";
}

// Beyond 8 ranks products overflow; the reference must wrap as the type's arithmetic does.
TEST(ReferenceTest, IntegersWrapBeyondEightRanks) {
  struct Case {
    DType t;
    int nranks;
    int bits;
  };
  for (Case c : {Case{DType::kUint8, 10, 8}, Case{DType::kInt8, 10, 8}, Case{DType::kInt32, 40, 32},
                 Case{DType::kUint32, 40, 32}}) {
    int wrapped = 0;
    for (size_t i = 0; i < 64; i++) {
      int64_t exact = 1;  // |product| <= 120^5 < 2^63
      uint64_t prod = 1;
      for (int r = 0; r < c.nranks; r++) {
        const int v = inputValue(i, c.t, r, 9);
        exact *= v;
        prod *= static_cast<uint64_t>(int64_t{v});
      }
      const uint64_t mask = (uint64_t{1} << c.bits) - 1;
      uint64_t out = 0;
      referenceReduce(&out, 1, c.t, RedOp::kProd, c.nranks, 9, i);
      EXPECT_EQ(out & mask, prod & mask) << dtypeName(c.t) << " element " << i;
      const int64_t limit = int64_t{1} << (c.bits - 1);
      wrapped += exact >= limit || exact < -limit;
    }
    EXPECT_GT(wrapped, 0) << dtypeName(c.t) << ": the case should overflow somewhere";
  }
}

// An implementation that reduces in the element type (rounding after every step), in reverse
// rank order, must get the reference's exact bits for sum/prod/max/min, and pre-multiplying by a
// rounded 1/n (NCCL's float avg) must stay within tolerance().
TEST(ReferenceTest, ExactInAnyOrderAtTypePrecision) {
  const size_t n = 512;
  for (DType t : {DType::kFloat16, DType::kBfloat16, DType::kFloat32, DType::kInt8}) {
    const size_t es = dtypeSize(t);
    for (int nranks = 1; nranks <= kMaxExactRanks; nranks++) {
      for (RedOp op : allRedOps()) {
        std::vector<char> ref(n * es), sim(n * es), tmp(es);
        referenceReduce(ref.data(), n, t, op, nranks, 11);
        auto round = [&](double v) {  // round v to the type
          storeFromDouble(tmp.data(), 0, t, v);
          return loadAsDouble(tmp.data(), 0, t);
        };
        const double scale = round(1.0 / nranks);
        for (size_t i = 0; i < n; i++) {
          double acc = 0;
          for (int r = nranks - 1; r >= 0; r--) {
            double v = inputValue(i, t, r, 11);
            if (op == RedOp::kAvg && isFloat(t)) v = round(v * scale);
            if (r == nranks - 1) {
              acc = v;
              continue;
            }
            switch (op) {
              case RedOp::kSum:
              case RedOp::kAvg:
                acc = round(acc + v);
                break;
              case RedOp::kProd:
                acc = round(acc * v);
                break;
              case RedOp::kMax:
                acc = std::max(acc, v);
                break;
              case RedOp::kMin:
                acc = std::min(acc, v);
                break;
            }
          }
          if (op == RedOp::kAvg && !isFloat(t)) acc = std::trunc(acc / nranks);
          storeFromDouble(sim.data(), i, t, acc);
        }
        std::string why;
        EXPECT_TRUE(compare(sim.data(), ref.data(), n, t, tolerance(t, op, nranks), &why))
            << dtypeName(t) << " " << redOpName(op) << " nranks " << nranks << ": " << why;
      }
    }
  }
}

TEST(ToleranceTest, Values) {
  for (DType t : {DType::kInt8, DType::kUint32, DType::kInt64}) {
    for (RedOp op : allRedOps()) EXPECT_EQ(tolerance(t, op, 7), 0) << dtypeName(t);
  }
  for (DType t : {DType::kFloat16, DType::kBfloat16, DType::kFloat32, DType::kFloat64}) {
    for (int n = 1; n <= kMaxExactRanks; n++) {
      EXPECT_EQ(tolerance(t, RedOp::kSum, n), 0);
      EXPECT_EQ(tolerance(t, RedOp::kProd, n), 0);
      EXPECT_EQ(tolerance(t, RedOp::kMax, n), 0);
      EXPECT_EQ(tolerance(t, RedOp::kMin, n), 0);
    }
    EXPECT_EQ(tolerance(t, RedOp::kAvg, 4), 0);  // 1/4 is exact
    EXPECT_GT(tolerance(t, RedOp::kAvg, 3), 0);
    EXPECT_GT(tolerance(t, RedOp::kSum, 16), 0);
  }
  EXPECT_DOUBLE_EQ(tolerance(DType::kFloat16, RedOp::kAvg, 3), 25 * std::ldexp(1.0, -11));
  EXPECT_LT(tolerance(DType::kFloat32, RedOp::kAvg, 7), 1e-5);
  EXPECT_LT(tolerance(DType::kBfloat16, RedOp::kAvg, 7), 0.2);
}

// ---- compare and poison -------------------------------------------------------------------

TEST(CompareTest, CatchesOneWrongElement) {
  for (DType t : allDTypes()) {
    const size_t n = 100;
    std::vector<char> a(n * dtypeSize(t)), b(n * dtypeSize(t));
    fillInput(a.data(), n, t, 0, 1);
    fillInput(b.data(), n, t, 0, 1);
    std::string why;
    EXPECT_TRUE(compare(a.data(), b.data(), n, t, 0, &why)) << why;
    storeFromDouble(b.data(), 37, t, loadAsDouble(b.data(), 37, t) + 1);
    EXPECT_FALSE(compare(a.data(), b.data(), n, t, 0, &why)) << dtypeName(t);
    EXPECT_NE(why.find("index 37"), std::string::npos) << why;
    EXPECT_NE(why.find("1 of 100"), std::string::npos) << why;
    EXPECT_FALSE(compare(a.data(), b.data(), n, t, 0, nullptr));
  }
}

TEST(CompareTest, ToleranceIsRelativeWithFloorOne) {
  double got[2] = {100.5, 0.004}, want[2] = {100.0, 0.0};
  EXPECT_TRUE(compare(got, want, 2, DType::kFloat64, 0.01, nullptr));    // 0.5 <= 1
  EXPECT_FALSE(compare(got, want, 2, DType::kFloat64, 0.004, nullptr));  // 0.5 > 0.4
  got[0] = 100.0;
  EXPECT_TRUE(compare(got, want, 2, DType::kFloat64, 0.005, nullptr));  // 0.004 <= 0.005 * 1
  got[1] = 0.006;
  EXPECT_FALSE(compare(got, want, 2, DType::kFloat64, 0.005, nullptr));  // near 0: absolute
}

TEST(CompareTest, IntegersCompareAllBits) {
  uint64_t a = (uint64_t{1} << 60) + 1, b = uint64_t{1} << 60;  // equal as doubles
  EXPECT_FALSE(compare(&a, &b, 1, DType::kUint64, 0.5, nullptr));
  int64_t c = -1, d = -1;
  EXPECT_TRUE(compare(&c, &d, 1, DType::kInt64, 0, nullptr));
}

TEST(PoisonTest, NeverLooksLikeAResult) {
  alignas(8) unsigned char buf[64 + 8];
  for (size_t start = 0; start < 8; start++) {  // any phase of the buffer
    fillPoison(buf + start, 64);
    for (DType t : allDTypes()) {
      const size_t es = dtypeSize(t);
      // Elements at type-aligned addresses, as a real buffer has them.
      const size_t first = (start + es - 1) / es * es;
      for (size_t off = first; off + es <= start + 64; off += es) {
        const double v = loadAsDouble(buf + off, 0, t);
        if (isFloat(t)) {
          EXPECT_TRUE(std::isnan(v)) << dtypeName(t) << " at " << off;
        } else if (t == DType::kInt8 && off % 8 == 6) {
          EXPECT_EQ(v, -16);  // the one documented exception
        } else {
          EXPECT_TRUE(std::fabs(v) > 120) << dtypeName(t) << " at " << off << " = " << v;
        }
      }
    }
  }
  // And compare() flags a poisoned element where a number is expected.
  float expected = 3, got;
  fillPoison(&got, sizeof got);
  EXPECT_FALSE(compare(&got, &expected, 1, DType::kFloat32, 1.0, nullptr));
}

// ---- buffers ------------------------------------------------------------------------------

TEST(BufferTest, HostRoundTripAndBounds) {
  Buffer buf(1000, MemKind::kHost);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % 4096, 0u);
  EXPECT_EQ(buf.bytes(), 1000u);
  std::vector<char> in(1000), out(1000);
  fillInput(in.data(), 250, DType::kInt32, 1, 1);
  buf.upload(in.data(), 1000);
  buf.download(out.data(), 1000);
  EXPECT_EQ(in, out);
  buf.upload(in.data(), 10, 990);
  EXPECT_THROW(buf.upload(in.data(), 11, 990), std::out_of_range);
  EXPECT_THROW(buf.download(out.data(), 1, 1000), std::out_of_range);
  buf.poison();
  EXPECT_TRUE(std::isnan(loadAsDouble(buf.data(), 3, DType::kFloat32)));
  Buffer empty(0, MemKind::kHost);
  EXPECT_NE(empty.data(), nullptr);
}

TEST(BufferTest, LargeHostBuffersAreKeptForTheSameSize) {
  if (!keepsLargeHostBuffers()) GTEST_SKIP() << "a sanitizer build: every buffer is freed";
  void* first = nullptr;
  {
    Buffer a(size_t{40} << 20, MemKind::kHost);
    first = a.data();
    std::memset(a.data(), 0x5a, a.bytes());
  }
  Buffer same(size_t{40} << 20, MemKind::kHost);  // the same request: the kept block
  EXPECT_EQ(same.data(), first);
  Buffer other(size_t{40} << 20, MemKind::kHost);  // that block is taken: a new one
  EXPECT_NE(other.data(), first);
  // The kept block comes back as it was left: tests poison or write what they read.
  EXPECT_EQ(static_cast<unsigned char*>(same.data())[12345], 0x5a);
  Buffer small(1000, MemKind::kHost);  // below 16 MiB: malloc's, aligned as ever
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 4096, 0u);
}

TEST(BufferTest, MemKindsMatchGpuPresence) {
  EXPECT_STREQ(memKindName(MemKind::kDevice), "device");
  const char* env = std::getenv("TCCL_TEST_MEM");
  if (env != nullptr && *env != '\0') GTEST_SKIP() << "TCCL_TEST_MEM is set";
  const std::vector<MemKind> kinds = memKinds();
  ASSERT_FALSE(kinds.empty());
  EXPECT_EQ(kinds[0], MemKind::kHost);
  EXPECT_EQ(kinds.size(), haveGpu() ? 2u : 1u);
  if (!haveGpu()) {
    EXPECT_THROW(Buffer(16, MemKind::kDevice), std::runtime_error);
    deviceSync();  // a no-op without a GPU
  }
}

TEST(BufferTest, DeviceRoundTrip) {
  if (!haveGpu()) GTEST_SKIP() << "no GPU";
  Buffer buf(4096 + 3, MemKind::kDevice);
  std::vector<char> in(buf.bytes()), out(buf.bytes());
  fillInput(in.data(), in.size(), DType::kUint8, 0, 5);
  buf.upload(in.data(), in.size());
  buf.download(out.data(), out.size());
  EXPECT_EQ(in, out);
  buf.poison();
  buf.download(out.data(), out.size());
  EXPECT_TRUE(std::isnan(loadAsDouble(out.data(), 0, DType::kFloat64)));
  deviceSync();
}

}  // namespace
}  // namespace test
}  // namespace tccl
