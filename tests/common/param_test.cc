/*
 * tests/common/param_test.cc: environment knobs (readIntParam, TCCL_PARAM, getEnvString).
 *
 * What it checks: every accepted integer spelling, that every malformed value falls back to
 * the default with a WARN naming the variable, and that TCCL_PARAM reads its variable once.
 *
 * NCCL counterpart: none (NCCL has no tests for ncclLoadParam).
 * Added in: foundation (common/).
 */
#include "tccl/common/param.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "bootstrap_test_util.h"  // ScopedEnv
#include "tccl/common/debug.h"

namespace tccl {
namespace {

using test::ScopedEnv;
constexpr const char* kVar = "TCCL_TEST_PARAM_VALUE";

int64_t readWith(const char* value, int64_t def = -77) {
  ScopedEnv env(kVar, value);
  return readIntParam(kVar, def);
}

TEST(Param, UnsetOrEmptyGivesDefault) {
  unsetenv(kVar);
  EXPECT_EQ(readIntParam(kVar, 5), 5);
  EXPECT_EQ(readWith("", 6), 6);
}

TEST(Param, Decimal) {
  EXPECT_EQ(readWith("42"), 42);
  EXPECT_EQ(readWith("0"), 0);
  EXPECT_EQ(readWith("-3"), -3);
  EXPECT_EQ(readWith("+8"), 8);
  EXPECT_EQ(readWith("  7 "), 7);
  EXPECT_EQ(readWith("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(readWith("-9223372036854775808"), std::numeric_limits<int64_t>::min());
}

TEST(Param, Hexadecimal) {
  EXPECT_EQ(readWith("0x1f"), 31);
  EXPECT_EQ(readWith("0X10"), 16);
  EXPECT_EQ(readWith("0xFFff"), 65535);
  EXPECT_EQ(readWith("-0x10"), -16);
}

TEST(Param, BinarySuffixes) {
  EXPECT_EQ(readWith("64K"), 65536);
  EXPECT_EQ(readWith("64k"), 65536);
  EXPECT_EQ(readWith("2M"), int64_t(2) << 20);
  EXPECT_EQ(readWith("2m"), int64_t(2) << 20);
  EXPECT_EQ(readWith("1G"), int64_t(1) << 30);
  EXPECT_EQ(readWith("-1K"), -1024);
  EXPECT_EQ(readWith("0x10K"), 16 * 1024);
}

TEST(Param, MalformedGivesDefaultAndWarns) {
  const char* bad[] = {"abc",
                       "12abc",
                       "0x",
                       "-",
                       "1KK",
                       "1T",
                       "4 2",
                       "99999999999999999999",
                       "9223372036854775808",
                       "-9223372036854775809",
                       "17179869184G",
                       "0xg"};
  for (const char* value : bad) {
    clearLastError();
    EXPECT_EQ(readWith(value, 11), 11) << value;
    std::string err = lastError();
    EXPECT_NE(err.find(kVar), std::string::npos) << "value " << value << ": " << err;
    EXPECT_NE(err.find(value), std::string::npos) << err;
  }
}

TEST(Param, ValidValueDoesNotWarn) {
  clearLastError();
  EXPECT_EQ(readWith("12"), 12);
  EXPECT_STREQ(lastError(), "");
}

TCCL_PARAM(TestCached, "TEST_CACHED_KNOB", 5)

TEST(Param, MacroReadsOnce) {
  ScopedEnv first("TCCL_TEST_CACHED_KNOB", "7");
  EXPECT_EQ(tcclParamTestCached(), 7);
  ScopedEnv second("TCCL_TEST_CACHED_KNOB", "9");
  EXPECT_EQ(tcclParamTestCached(), 7) << "a knob is read once per process";
}

TEST(Param, GetEnvString) {
  unsetenv(kVar);
  EXPECT_EQ(getEnvString(kVar), "");
  EXPECT_EQ(getEnvString(kVar, "dflt"), "dflt");
  {
    ScopedEnv env(kVar, "");
    EXPECT_EQ(getEnvString(kVar, "dflt"), "dflt");
  }
  ScopedEnv env(kVar, "eth0,ib");
  EXPECT_EQ(getEnvString(kVar, "dflt"), "eth0,ib");
}

}  // namespace
}  // namespace tccl
