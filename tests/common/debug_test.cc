/*
 * tests/common/debug_test.cc: log filtering, the line format, TCCL_DEBUG_FILE and the
 * per-thread last error.
 *
 * What it checks: TCCL_DEBUG levels and TCCL_DEBUG_SUBSYS lists (with ^) decide what prints;
 * a WARN reaches the thread's last error even when nothing prints; lines have the NCCL-like
 * prefix "host:pid:tid [rank] TCCL LEVEL file:line"; %h/%p expand in the file name; lines of
 * concurrent threads do not interleave.
 *
 * NCCL counterpart: none.
 * Added in: foundation (common/).
 */
#include "tccl/common/debug.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap_test_util.h"  // ScopedEnv
#include "tccl/common/socket.h"

namespace tccl {
namespace {

using test::ScopedEnv;

// Every test leaves the logger as it found it: quiet, default subsystems.
class Debug : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("TCCL_DEBUG");
    unsetenv("TCCL_DEBUG_SUBSYS");
    unsetenv("TCCL_DEBUG_FILE");
    resetLogConfig();
    setLogRank(-1);
  }
  static std::vector<std::string> readLines(const std::string& path) {
    std::ifstream f(path);
    std::vector<std::string> lines;
    for (std::string l; std::getline(f, l);) lines.push_back(l);
    return lines;
  }
};

TEST_F(Debug, WarnIsLastErrorEvenWhenQuiet) {
  unsetenv("TCCL_DEBUG");
  resetLogConfig();
  EXPECT_FALSE(logEnabled(LogLevel::kWarn, kAll));
  clearLastError();
  EXPECT_STREQ(lastError(), "");
  TCCL_WARN("disk %s is %d%% full", "sda", 99);
  EXPECT_STREQ(lastError(), "disk sda is 99% full");
  clearLastError();
  EXPECT_STREQ(lastError(), "");
}

TEST_F(Debug, LastErrorIsPerThread) {
  clearLastError();
  TCCL_WARN("main thread error");
  std::string seen, own;
  std::thread t([&] {
    seen = lastError();
    TCCL_WARN("worker error");
    own = lastError();
  });
  t.join();
  EXPECT_EQ(seen, "");
  EXPECT_EQ(own, "worker error");
  EXPECT_STREQ(lastError(), "main thread error");
}

TEST_F(Debug, LogRankIsPerThread) {
  setLogRank(4);
  int other = 0;
  std::thread t([&] { other = logRank(); });
  t.join();
  EXPECT_EQ(logRank(), 4);
  EXPECT_EQ(other, -1);
}

TEST_F(Debug, LevelFilter) {
  ScopedEnv level("TCCL_DEBUG", "WARN");
  resetLogConfig();
  EXPECT_TRUE(logEnabled(LogLevel::kWarn, kAll));
  EXPECT_FALSE(logEnabled(LogLevel::kInfo, kInit));
  setenv("TCCL_DEBUG", "info", 1);  // case-insensitive, as NCCL
  resetLogConfig();
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kInit));
  EXPECT_FALSE(logEnabled(LogLevel::kTrace, kInit));
  setenv("TCCL_DEBUG", "TRACE", 1);
  resetLogConfig();
  EXPECT_TRUE(logEnabled(LogLevel::kTrace, kInit));
  setenv("TCCL_DEBUG", "VERSION", 1);
  resetLogConfig();
  EXPECT_FALSE(logEnabled(LogLevel::kWarn, kAll));
  setenv("TCCL_DEBUG", "nonsense", 1);
  resetLogConfig();
  EXPECT_FALSE(logEnabled(LogLevel::kWarn, kAll));
}

TEST_F(Debug, SubsystemFilter) {
  ScopedEnv level("TCCL_DEBUG", "INFO");
  resetLogConfig();  // default: INIT,BOOTSTRAP,ENV
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kInit));
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kBootstrap));
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kEnv));
  EXPECT_FALSE(logEnabled(LogLevel::kInfo, kNet));
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kNet | kInit)) << "any listed subsystem prints";

  ScopedEnv subsys("TCCL_DEBUG_SUBSYS", "NET,coll");
  resetLogConfig();
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kNet));
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kColl));
  EXPECT_FALSE(logEnabled(LogLevel::kInfo, kInit));
  EXPECT_TRUE(logEnabled(LogLevel::kWarn, kInit)) << "WARN ignores the subsystem list";

  setenv("TCCL_DEBUG_SUBSYS", "^NET,TUNING", 1);
  resetLogConfig();
  EXPECT_FALSE(logEnabled(LogLevel::kInfo, kNet));
  EXPECT_FALSE(logEnabled(LogLevel::kInfo, kTuning));
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kInit));
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kFault));

  setenv("TCCL_DEBUG_SUBSYS", "ALL", 1);
  resetLogConfig();
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kIb));
  EXPECT_TRUE(logEnabled(LogLevel::kInfo, kProxy));
}

TEST_F(Debug, FileAndLineFormat) {
  std::string pattern = ::testing::TempDir() + "tccl_debug_test.%h.%p.log";
  std::string path = ::testing::TempDir() + "tccl_debug_test." + getHostName() + "." +
                     std::to_string(getpid()) + ".log";
  unlink(path.c_str());
  {
    ScopedEnv level("TCCL_DEBUG", "INFO");
    ScopedEnv file("TCCL_DEBUG_FILE", pattern);
    resetLogConfig();
    TCCL_INFO(kInit, "hello %d", 5);
    TCCL_INFO(kNet, "filtered out");
    setLogRank(3);
    TCCL_WARN("boom at %s", "step 2");
    logVersionOnce("tccl version 0.1");
    logVersionOnce("tccl version 0.1");
  }
  resetLogConfig();  // closes the file
  std::vector<std::string> lines = readLines(path);
  ASSERT_EQ(lines.size(), 3u) << "file " << path;
  std::string prefix = std::string(getHostName()) + ":" + std::to_string(getpid()) + ":";
  std::regex info(R"(^[^:]+:\d+:\d+ \[-\] TCCL INFO debug_test\.cc:\d+ hello 5$)");
  std::regex warn(R"(^[^:]+:\d+:\d+ \[3\] TCCL WARN debug_test\.cc:\d+ boom at step 2$)");
  EXPECT_EQ(lines[0].rfind(prefix, 0), 0u) << lines[0];
  EXPECT_TRUE(std::regex_match(lines[0], info)) << lines[0];
  EXPECT_TRUE(std::regex_match(lines[1], warn)) << lines[1];
  EXPECT_NE(lines[2].find("TCCL VERSION tccl version 0.1"), std::string::npos) << lines[2];
  unlink(path.c_str());
}

TEST_F(Debug, UnopenableFileFallsBackToStderr) {
  ScopedEnv level("TCCL_DEBUG", "WARN");
  ScopedEnv file("TCCL_DEBUG_FILE", "/nonexistent-dir/tccl.log");
  ::testing::internal::CaptureStderr();
  resetLogConfig();
  TCCL_WARN("still visible");
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot open TCCL_DEBUG_FILE"), std::string::npos) << err;
  EXPECT_NE(err.find("TCCL WARN debug_test.cc"), std::string::npos) << err;
  EXPECT_NE(err.find("still visible"), std::string::npos) << err;
}

TEST_F(Debug, ConcurrentLinesDoNotInterleave) {
  std::string path =
      ::testing::TempDir() + "tccl_debug_concurrent." + std::to_string(getpid()) + ".log";
  constexpr int kThreads = 4, kLines = 200;
  {
    ScopedEnv level("TCCL_DEBUG", "INFO");
    ScopedEnv subsys("TCCL_DEBUG_SUBSYS", "COLL");
    ScopedEnv file("TCCL_DEBUG_FILE", path);
    resetLogConfig();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([t] {
        setLogRank(t);
        for (int i = 0; i < kLines; ++i)
          TCCL_INFO(kColl, "thread %d line %d %s", t, i, std::string(100, 'x').c_str());
      });
    for (auto& th : threads) th.join();
  }
  resetLogConfig();
  std::vector<std::string> lines = readLines(path);
  ASSERT_EQ(lines.size(), static_cast<size_t>(kThreads * kLines));
  std::regex shape(
      R"(^[^:]+:\d+:\d+ \[(\d)\] TCCL INFO debug_test\.cc:\d+ thread (\d) line \d+ x{100}$)");
  for (const auto& l : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, shape)) << l;
    EXPECT_EQ(m[1], m[2]) << "the rank prefix is the logging thread's";
  }
  unlink(path.c_str());
}

TEST_F(Debug, CheckMacrosPropagate) {
  auto failing = []() -> tcclResult_t {
    TCCL_ARG_CHECK(1 + 1 == 3, "arithmetic is broken: %d", 2);
    return tcclSuccess;
  };
  auto outer = [&]() -> tcclResult_t {
    TCCL_CHECK(failing());
    return tcclSuccess;
  };
  clearLastError();
  EXPECT_EQ(outer(), tcclInvalidArgument);
  EXPECT_STREQ(lastError(), "arithmetic is broken: 2");
  auto sys = []() -> tcclResult_t {
    errno = EBADF;
    TCCL_SYS_CHECK(-1, "close");
    return tcclSuccess;
  };
  EXPECT_EQ(sys(), tcclSystemError);
  EXPECT_NE(std::string(lastError()).find("close failed"), std::string::npos);
}

}  // namespace
}  // namespace tccl
