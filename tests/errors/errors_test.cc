/*
 * tests/errors/errors_test.cc: the misuses docs/errors.md lists that no other test covers.
 *
 * What it is: the error table's missing rows, each asserting the exact tcclResult_t and that
 * tcclGetLastError names the problem. tests/p2p/p2p_errors_test.cc (stage 1 calls) and
 * tests/ring/ring_errors_test.cc (collectives, custom reductions) cover the rest:
 *  - a destroyed communicator (use after destroy, destroy twice, abort after destroy), and
 *    destroy / abort of NULL (a no-op, as in NCCL);
 *  - tcclCommCuDevice with a NULL output;
 *  - tcclConfig_t of the wrong size, and blocking = 0 before stage 7;
 *  - a corrupted unique id (zeros, a flipped byte);
 *  - tcclCommInitFromEnv with variables missing or out of range;
 *  - TCCL_COMM_ID without a port;
 *  - two streams for one communicator in one group (p2p and collectives);
 *  - a send to oneself without the matching receive, or with another size;
 *  - more p2p operations in one group than a batch holds (refused in stage 2; a later stage
 *    may split them, so success with correct data passes too);
 *  - a send and its receive with different counts (the receiver gets tcclInvalidUsage).
 * tests/errors/errors_fork_test.cc has the cases that need separate processes.
 *
 * Invariants: every rank makes the same calls; the invalid ones fail before any communication
 * (except the count mismatch, which runs on a communicator of its own, destroyed after it);
 * after each test a valid operation on the shared communicator still works (TearDown).
 *
 * NCCL counterpart: src/enqueue.cc (ArgsCheck), src/init.cc, src/group.cc argument checks.
 * Added in: reliability (tests/errors), for stage 2 and every later stage.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "tccl.h"
#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace errors {
namespace {

::testing::AssertionResult lastErrorMentions(std::initializer_list<const char*> words) {
  const char* msg = tcclGetLastError(nullptr);
  if (msg == nullptr) return ::testing::AssertionFailure() << "tcclGetLastError returned NULL";
  std::string lower(msg);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (lower.empty()) return ::testing::AssertionFailure() << "tcclGetLastError is empty";
  std::string list;
  for (const char* w : words) {
    if (lower.find(w) != std::string::npos) return ::testing::AssertionSuccess();
    list += std::string(list.empty() ? "" : ", ") + "\"" + w + "\"";
  }
  return ::testing::AssertionFailure() << "tcclGetLastError \"" << msg << "\" mentions none of "
                                       << list;
}

/// Expects `call` to return `code` and the last error to mention one of the words.
#define EXPECT_TCCL_ERROR(code, call, ...)                   \
  do {                                                       \
    EXPECT_EQ((call), (code)) << #call;                      \
    EXPECT_TRUE(lastErrorMentions({__VA_ARGS__})) << #call;  \
  } while (0)

constexpr tcclResult_t kBad = tcclInvalidArgument;

tcclResult_t initWorldComm(tcclComm_t* comm) {
  tcclUniqueId id{};
  tcclResult_t res = tcclSuccess;
  if (worldRank() == 0) res = tcclGetUniqueId(&id);
  if (!allRanksOk(res == tcclSuccess)) return res != tcclSuccess ? res : tcclSystemError;
  bcast(&id, sizeof(id), 0);
  return tcclCommInitRank(comm, worldSize(), id, worldRank());
}

/// Sets (or, with nullptr, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
    else ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

class ErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { initResult_ = initWorldComm(&comm_); }
  static void TearDownTestSuite() {
    if (comm_ != nullptr) {
      EXPECT_EQ(tcclCommDestroy(comm_), tcclSuccess);
    }
    comm_ = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(initResult_, tcclSuccess) << tcclGetLastError(nullptr);
    rank_ = worldRank();
    n_ = worldSize();
  }
  void TearDown() override {
    // The shared communicator must still work: an allreduce of ranks' ids.
    std::vector<int32_t> in(33, rank_ + 1), out(33, -1);
    tcclResult_t r = tcclAllReduce(in.data(), out.data(), in.size(), tcclInt32, tcclSum, comm_,
                                   nullptr);
    EXPECT_EQ(r, tcclSuccess) << "communicator broken after the test: "
                              << tcclGetLastError(nullptr);
    EXPECT_EQ(out, std::vector<int32_t>(33, n_ * (n_ + 1) / 2));
    allRanksOk(r == tcclSuccess);
  }

  static tcclComm_t comm_;
  static tcclResult_t initResult_;
  int rank_ = 0, n_ = 1;
  alignas(16) char buf_[4096] = {};
  alignas(16) char buf2_[4096] = {};
};
tcclComm_t ErrorsTest::comm_ = nullptr;
tcclResult_t ErrorsTest::initResult_ = tcclSuccess;

TEST_F(ErrorsTest, DestroyedCommunicator) {
  tcclComm_t c = nullptr;
  ASSERT_EQ(initWorldComm(&c), tcclSuccess) << tcclGetLastError(nullptr);
  ASSERT_EQ(tcclCommDestroy(c), tcclSuccess) << tcclGetLastError(nullptr);
  // The handle is now dangling. tccl checks handles against its registry of live
  // communicators by address (it never dereferences an unknown one), and no communicator is
  // created between the destroy and these calls, so the address cannot have been reused.
  int v = -1;
  EXPECT_TCCL_ERROR(kBad, tcclCommCount(c, &v), "not valid", "destroyed");
  EXPECT_TCCL_ERROR(kBad, tcclCommUserRank(c, &v), "not valid", "destroyed");
  EXPECT_TCCL_ERROR(kBad, tcclSend(buf_, 1, tcclInt8, 0, c, nullptr), "not valid", "destroyed");
  EXPECT_TCCL_ERROR(kBad, tcclRecv(buf_, 1, tcclInt8, 0, c, nullptr), "not valid", "destroyed");
  EXPECT_TCCL_ERROR(kBad, tcclAllReduce(buf_, buf2_, 1, tcclInt8, tcclSum, c, nullptr),
                    "not valid", "destroyed");
  EXPECT_TCCL_ERROR(kBad, tcclBroadcast(buf_, buf2_, 1, tcclInt8, 0, c, nullptr), "not valid",
                    "destroyed");
  EXPECT_TCCL_ERROR(kBad, tcclCommDestroy(c), "not valid", "destroyed");
  EXPECT_TCCL_ERROR(kBad, tcclCommAbort(c), "not valid", "destroyed");
  EXPECT_EQ(v, -1) << "a failed query must not write its output";
  // NULL is not a misuse for these two (as in NCCL): nothing to free.
  EXPECT_EQ(tcclCommDestroy(nullptr), tcclSuccess);
  EXPECT_EQ(tcclCommAbort(nullptr), tcclSuccess);
}

TEST_F(ErrorsTest, CuDeviceNullOutput) {
  EXPECT_TCCL_ERROR(kBad, tcclCommCuDevice(comm_, nullptr), "device", "null");
  int dev = -2;
  EXPECT_EQ(tcclCommCuDevice(comm_, &dev), tcclSuccess);
  EXPECT_EQ(dev >= 0, haveGpu()) << "device " << dev;
}

TEST_F(ErrorsTest, ConfigOfTheWrongSize) {
  tcclUniqueId id{};  // never read: the config is checked first
  tcclConfig_t config = TCCL_CONFIG_INITIALIZER;
  config.size = sizeof(tcclConfig_t) - 8;  // a program built against another header
  tcclComm_t c = nullptr;
  EXPECT_TCCL_ERROR(kBad, tcclCommInitRankConfig(&c, 1, id, 0, &config), "size");
  EXPECT_EQ(c, nullptr);
}

TEST_F(ErrorsTest, NonBlockingConfigBeforeStage7) {
  tcclUniqueId id{};
  ASSERT_EQ(tcclGetUniqueId(&id), tcclSuccess) << tcclGetLastError(nullptr);
  tcclConfig_t config = TCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  tcclComm_t c = nullptr;
  // One rank: a wrong success would not wait for anybody. The id stays unused on refusal.
  tcclResult_t r = tcclCommInitRankConfig(&c, 1, id, 0, &config);
  if (TCCL_STAGE >= 7) {  // non-blocking communicators exist from stage 7 on
    if (r == tcclSuccess || r == tcclInProgress) tcclCommDestroy(c);
    GTEST_SKIP() << "stage " << TCCL_STAGE << " supports blocking = 0";
  }
  EXPECT_EQ(r, tcclInvalidUsage);
  EXPECT_TRUE(lastErrorMentions({"blocking"}));
  // The same config with blocking = 1, a name and channel bounds is fine.
  config.blocking = 1;
  config.commName = "errors-test";
  config.minCTAs = 1;
  config.maxCTAs = 2;
  ASSERT_EQ(tcclCommInitRankConfig(&c, 1, id, 0, &config), tcclSuccess)
      << tcclGetLastError(nullptr);
  EXPECT_EQ(tcclCommDestroy(c), tcclSuccess);
}

TEST_F(ErrorsTest, CorruptedUniqueId) {
  tcclComm_t c = nullptr;
  tcclUniqueId zeros{};
  EXPECT_TCCL_ERROR(kBad, tcclCommInitRank(&c, 1, zeros, 0), "unique id");
  tcclUniqueId id{};
  ASSERT_EQ(tcclGetUniqueId(&id), tcclSuccess) << tcclGetLastError(nullptr);
  tcclUniqueId flipped = id;
  flipped.internal[20] ^= 0x5a;  // inside the root address: only the checksum can tell
  EXPECT_TCCL_ERROR(kBad, tcclCommInitRank(&c, 1, flipped, 0), "unique id", "checksum");
  EXPECT_EQ(c, nullptr);
  // Unused ids are harmless: the root their tcclGetUniqueId started simply waits.
}

TEST_F(ErrorsTest, InitFromEnvMissingOrBadVariables) {
  tcclComm_t c = nullptr;
  {
    ScopedEnv r("RANK", nullptr), w("WORLD_SIZE", nullptr), a("MASTER_ADDR", nullptr),
        p("MASTER_PORT", nullptr);
    EXPECT_TCCL_ERROR(kBad, tcclCommInitFromEnv(&c), "not set");
  }
  {
    ScopedEnv r("RANK", "0"), w("WORLD_SIZE", "2"), a("MASTER_ADDR", "127.0.0.1"),
        p("MASTER_PORT", nullptr);
    EXPECT_TCCL_ERROR(kBad, tcclCommInitFromEnv(&c), "master_port");
  }
  {
    ScopedEnv r("RANK", "0"), w("WORLD_SIZE", "two"), a("MASTER_ADDR", "127.0.0.1"),
        p("MASTER_PORT", "29500");
    EXPECT_TCCL_ERROR(kBad, tcclCommInitFromEnv(&c), "world_size");
  }
  {
    ScopedEnv r("RANK", "2"), w("WORLD_SIZE", "2"), a("MASTER_ADDR", "127.0.0.1"),
        p("MASTER_PORT", "29500");
    EXPECT_TCCL_ERROR(kBad, tcclCommInitFromEnv(&c), "rank");
  }
  {
    ScopedEnv r("RANK", "0"), w("WORLD_SIZE", "1"), a("MASTER_ADDR", "127.0.0.1"),
        p("MASTER_PORT", "0");
    EXPECT_TCCL_ERROR(kBad, tcclCommInitFromEnv(&c), "port");
  }
  EXPECT_EQ(c, nullptr);
}

TEST_F(ErrorsTest, CommIdWithoutPort) {
  ScopedEnv id("TCCL_COMM_ID", "127.0.0.1");
  tcclUniqueId u{};
  EXPECT_TCCL_ERROR(kBad, tcclGetUniqueId(&u), "port");
}

TEST_F(ErrorsTest, TwoStreamsForOneCommunicatorInOneGroup) {
  // Never used as streams: the group fails at the second call, before anything is launched.
  const cudaStream_t a = nullptr;
  const cudaStream_t b = reinterpret_cast<cudaStream_t>(uintptr_t{0x10});
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  EXPECT_EQ(tcclSend(buf_, 8, tcclInt8, rank_, comm_, a), tcclSuccess);
  EXPECT_TCCL_ERROR(tcclInvalidUsage, tcclRecv(buf2_, 8, tcclInt8, rank_, comm_, b), "stream");
  EXPECT_TCCL_ERROR(tcclInvalidUsage, tcclGroupEnd(), "stream", "group");

  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  EXPECT_EQ(tcclAllReduce(buf_, buf2_, 8, tcclFloat32, tcclSum, comm_, a), tcclSuccess);
  EXPECT_TCCL_ERROR(tcclInvalidUsage,
                    tcclBroadcast(buf_, buf2_, 8, tcclFloat32, 0, comm_, b), "stream");
  EXPECT_EQ(tcclGroupEnd(), tcclInvalidUsage);
}

TEST_F(ErrorsTest, SendToSelfWithoutMatchingReceive) {
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  EXPECT_EQ(tcclSend(buf_, 16, tcclInt8, rank_, comm_, nullptr), tcclSuccess);
  EXPECT_TCCL_ERROR(tcclInvalidUsage, tcclGroupEnd(), "itself");

  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  EXPECT_EQ(tcclSend(buf_, 16, tcclInt8, rank_, comm_, nullptr), tcclSuccess);
  EXPECT_EQ(tcclRecv(buf2_, 8, tcclInt8, rank_, comm_, nullptr), tcclSuccess);
  EXPECT_TCCL_ERROR(tcclInvalidUsage, tcclGroupEnd(), "itself");
  // Without a group the send alone is a group of one: refused the same way, never a hang.
  EXPECT_TCCL_ERROR(tcclInvalidUsage, tcclSend(buf_, 16, tcclInt8, rank_, comm_, nullptr),
                    "itself");
}

TEST_F(ErrorsTest, MoreP2pOperationsThanOneGroupHolds) {
  // 300 one-element messages to oneself: more than one work batch holds in stage 2.
  constexpr int kOps = 300;
  std::vector<int32_t> in(kOps), out(kOps, -1);
  for (int i = 0; i < kOps; i++) in[i] = i * 7 + rank_;
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  for (int i = 0; i < kOps; i++) {
    EXPECT_EQ(tcclSend(&in[i], 1, tcclInt32, rank_, comm_, nullptr), tcclSuccess);
    EXPECT_EQ(tcclRecv(&out[i], 1, tcclInt32, rank_, comm_, nullptr), tcclSuccess);
  }
  tcclResult_t r = tcclGroupEnd();
  if (r == tcclSuccess) {
    EXPECT_EQ(out, in) << "the group succeeded, so every message must have arrived";
  } else {
    EXPECT_EQ(r, tcclInvalidUsage);
    EXPECT_TRUE(lastErrorMentions({"too large"}));
  }
}

TEST_F(ErrorsTest, SendAndReceiveCountsDiffer) {
  if (n_ < 2) GTEST_SKIP() << "needs two ranks";
  // A communicator of its own: after the mismatch its connection is out of step.
  tcclComm_t c = nullptr;
  ASSERT_EQ(initWorldComm(&c), tcclSuccess) << tcclGetLastError(nullptr);
  // Pairs (0,1), (2,3)...: the even rank sends 64 int32, the odd one receives only 32.
  const int partner = rank_ ^ 1;
  tcclResult_t r = tcclSuccess;
  std::vector<int32_t> data(64, 5);
  if (partner < n_) {
    r = rank_ % 2 == 0 ? tcclSend(data.data(), 64, tcclInt32, partner, c, nullptr)
                       : tcclRecv(data.data(), 32, tcclInt32, partner, c, nullptr);
  }
  if (partner < n_ && rank_ % 2 == 1) {
    EXPECT_EQ(r, tcclInvalidUsage) << tcclGetErrorString(r);
    EXPECT_TRUE(lastErrorMentions({"size mismatch", "counts differ"}));
  } else {
    // The message fits in one FIFO step, so the sender is done once it is on the wire.
    EXPECT_EQ(r, tcclSuccess) << tcclGetLastError(nullptr);
  }
  allRanksOk(true);  // both ends have finished before either destroys
  EXPECT_EQ(tcclCommDestroy(c), tcclSuccess) << tcclGetLastError(nullptr);
}

}  // namespace
}  // namespace errors
}  // namespace test
}  // namespace tccl
