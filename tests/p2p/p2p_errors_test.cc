/*
 * tests/p2p/p2p_errors_test.cc: bad input gives the right error code and a message that says
 * what was wrong; nothing crashes or hangs.
 *
 * What it is: argument checking of every stage-1 call: null communicator, null buffers with a
 * count (a null buffer with count 0 is fine), counts whose byte size overflows size_t, invalid
 * data types, peers and roots out of range, group misuse, destroying a communicator with
 * operations pending in an open group, bad tcclCommInitRank arguments and a config without the
 * magic. Every check asserts the exact tcclResult_t AND that tcclGetLastError names the problem.
 *
 * Invariants: every rank makes the same calls (invalid calls fail locally, before any
 * communication, so they never leave a peer waiting); after each misuse a valid call on the
 * same communicator still works.
 *
 * NCCL counterpart: src/enqueue.cc (ArgsCheck), src/group.cc, src/init.cc argument checks.
 * Added in: stage 1.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "p2p_patterns.h"

namespace tccl {
namespace test {
namespace p2p {
namespace {

/// Passes when tcclGetLastError(comm) is non-empty and contains one of `words` (any case).
::testing::AssertionResult lastErrorMentions(tcclComm_t comm,
                                             std::initializer_list<const char*> words) {
  const char* msg = tcclGetLastError(comm);
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
  return ::testing::AssertionFailure()
         << "tcclGetLastError \"" << msg << "\" mentions none of " << list;
}

/// Expects `call` to return `code` and the last error to mention one of the words.
#define EXPECT_TCCL_ERROR(code, comm, call, ...)                    \
  do {                                                              \
    EXPECT_EQ((call), (code)) << #call;                             \
    EXPECT_TRUE(lastErrorMentions((comm), {__VA_ARGS__})) << #call; \
  } while (0)

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
    // The communicator must still work after whatever the test did to it.
    std::string why;
    bool ok = runPattern(comm_, Pattern::kShift, DType::kInt32, 3, MemKind::kHost, 0, 1, &why);
    EXPECT_TRUE(ok) << "communicator broken after the test: " << why;
    allRanksOk(ok);
  }
  static tcclComm_t comm_;
  static tcclResult_t initResult_;
  int rank_ = 0, n_ = 1;
  char buf_[256] = {};
  char buf2_[256] = {};
};
tcclComm_t ErrorsTest::comm_ = nullptr;
tcclResult_t ErrorsTest::initResult_ = tcclSuccess;

TEST_F(ErrorsTest, NullCommunicator) {
  const tcclResult_t kBad = tcclInvalidArgument;
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclSend(buf_, 1, tcclInt8, 0, nullptr, nullptr), "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclRecv(buf_, 1, tcclInt8, 0, nullptr, nullptr), "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclSendRecv(buf_, buf2_, 1, tcclInt8, 0, 0, nullptr, nullptr),
                    "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclAlltoAll(buf_, buf2_, 1, tcclInt8, nullptr, nullptr),
                    "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclGather(buf_, buf2_, 1, tcclInt8, 0, nullptr, nullptr),
                    "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclScatter(buf_, buf2_, 1, tcclInt8, 0, nullptr, nullptr),
                    "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclNeighborExchange(buf_, buf2_, 1, tcclInt8, nullptr, nullptr),
                    "comm");
  int v = 0;
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclCommCount(nullptr, &v), "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclCommUserRank(nullptr, &v), "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclCommCuDevice(nullptr, &v), "comm");
  tcclResult_t async;
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclCommGetAsyncError(nullptr, &async), "comm");
  // Null output pointers on a good communicator.
  EXPECT_TCCL_ERROR(kBad, comm_, tcclCommCount(comm_, nullptr), "null", "count", "pointer");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclCommUserRank(comm_, nullptr), "null", "rank", "pointer");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclCommGetAsyncError(comm_, nullptr), "null", "pointer", "error");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclGetVersion(nullptr), "null", "version", "pointer");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclGetUniqueId(nullptr), "null", "id", "pointer");
}

TEST_F(ErrorsTest, NullBufferWithCount) {
  const tcclResult_t kBad = tcclInvalidArgument;
  const int self = rank_;
  EXPECT_TCCL_ERROR(kBad, comm_, tcclSend(nullptr, 4, tcclInt8, self, comm_, nullptr), "null",
                    "buff");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclRecv(nullptr, 4, tcclInt8, self, comm_, nullptr), "null",
                    "buff");
  EXPECT_TCCL_ERROR(kBad, comm_,
                    tcclSendRecv(nullptr, buf2_, 4, tcclInt8, self, self, comm_, nullptr), "null",
                    "buff");
  EXPECT_TCCL_ERROR(kBad, comm_,
                    tcclSendRecv(buf_, nullptr, 4, tcclInt8, self, self, comm_, nullptr), "null",
                    "buff");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclAlltoAll(nullptr, buf2_, 4, tcclInt8, comm_, nullptr), "null",
                    "buff");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclAlltoAll(buf_, nullptr, 4, tcclInt8, comm_, nullptr), "null",
                    "buff");
  // Gather: sendbuff matters everywhere, recvbuff on the root. Scatter: the reverse.
  EXPECT_TCCL_ERROR(kBad, comm_, tcclGather(nullptr, buf2_, 4, tcclInt8, 0, comm_, nullptr), "null",
                    "buff");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclScatter(buf_, nullptr, 4, tcclInt8, 0, comm_, nullptr), "null",
                    "buff");
  if (rank_ == 0) {
    EXPECT_TCCL_ERROR(kBad, comm_, tcclGather(buf_, nullptr, 4, tcclInt8, 0, comm_, nullptr),
                      "null", "buff");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclScatter(nullptr, buf2_, 4, tcclInt8, 0, comm_, nullptr),
                      "null", "buff");
  }
  EXPECT_TCCL_ERROR(kBad, comm_, tcclNeighborExchange(nullptr, buf2_, 4, tcclInt8, comm_, nullptr),
                    "null", "buff");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclNeighborExchange(buf_, nullptr, 4, tcclInt8, comm_, nullptr),
                    "null", "buff");
}

TEST_F(ErrorsTest, NullBufferWithCountZeroIsFine) {
  const int partner = (rank_ ^ 1) < n_ ? (rank_ ^ 1) : rank_;
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  EXPECT_EQ(tcclSend(nullptr, 0, tcclFloat32, partner, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_EQ(tcclRecv(nullptr, 0, tcclFloat32, partner, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_EQ(tcclGroupEnd(), tcclSuccess) << tcclGetLastError(comm_);
  EXPECT_EQ(tcclSendRecv(nullptr, nullptr, 0, tcclInt8, partner, partner, comm_, nullptr),
            tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_EQ(tcclAlltoAll(nullptr, nullptr, 0, tcclInt8, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_EQ(tcclGather(nullptr, nullptr, 0, tcclInt8, 0, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_EQ(tcclScatter(nullptr, nullptr, 0, tcclInt8, 0, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_EQ(tcclNeighborExchange(nullptr, nullptr, 0, tcclInt8, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
}

TEST_F(ErrorsTest, RootOnlyBuffersMayBeNullElsewhere) {
  // Gather's recvbuff and scatter's sendbuff are significant on the root only (tccl.h).
  const int root = n_ - 1;
  GuardedBuffer in(16, MemKind::kHost), out(16 * n_, MemKind::kHost);
  in.fillAt(0, 16, DType::kUint8, rank_, 3);
  EXPECT_EQ(tcclGather(in.data(), rank_ == root ? out.data() : nullptr, 16, tcclUint8, root, comm_,
                       nullptr),
            tcclSuccess)
      << tcclGetLastError(comm_);
  std::string why;
  if (rank_ == root) {
    const uint8_t* v = out.view() + GuardedBuffer::kGuard;
    for (int i = 0; i < n_; i++)
      EXPECT_TRUE(matchesInput(v + 16 * i, 16, DType::kUint8, i, 3, "gather block", &why)) << why;
  }
  GuardedBuffer got(16, MemKind::kHost);
  if (rank_ == root)
    for (int i = 0; i < n_; i++) out.fillAt(16 * i, 16, DType::kUint8, root, 10 + i);
  EXPECT_EQ(tcclScatter(rank_ == root ? out.data() : nullptr, got.data(), 16, tcclUint8, root,
                        comm_, nullptr),
            tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_TRUE(matchesInput(got.view() + GuardedBuffer::kGuard, 16, DType::kUint8, root, 10 + rank_,
                           "scatter block", &why))
      << why;
}

TEST_F(ErrorsTest, ByteSizeOverflow) {
  const tcclResult_t kBad = tcclInvalidArgument;
  const size_t over8 = SIZE_MAX / 8 + 1;  // count * sizeof(int64) wraps around
  EXPECT_TCCL_ERROR(kBad, comm_, tcclSend(buf_, over8, tcclInt64, rank_, comm_, nullptr),
                    "overflow", "count", "size", "large");
  EXPECT_TCCL_ERROR(kBad, comm_,
                    tcclRecv(buf_, SIZE_MAX / 2 + 1, tcclFloat16, rank_, comm_, nullptr),
                    "overflow", "count", "size", "large");
  EXPECT_TCCL_ERROR(kBad, comm_,
                    tcclSendRecv(buf_, buf2_, over8, tcclFloat64, rank_, rank_, comm_, nullptr),
                    "overflow", "count", "size", "large");
  // 2*count elements in neighbor exchange's buffers, nranks*count in alltoall's.
  EXPECT_TCCL_ERROR(kBad, comm_,
                    tcclNeighborExchange(buf_, buf2_, SIZE_MAX / 2 + 1, tcclInt8, comm_, nullptr),
                    "overflow", "count", "size", "large");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclAlltoAll(buf_, buf2_, over8, tcclInt64, comm_, nullptr),
                    "overflow", "count", "size", "large");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclGather(buf_, buf2_, over8, tcclUint64, 0, comm_, nullptr),
                    "overflow", "count", "size", "large");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclScatter(buf_, buf2_, over8, tcclUint64, 0, comm_, nullptr),
                    "overflow", "count", "size", "large");
  if (n_ >= 2) {
    const size_t overN = SIZE_MAX / n_ + 1;  // fits alone, nranks*count does not
    EXPECT_TCCL_ERROR(kBad, comm_, tcclAlltoAll(buf_, buf2_, overN, tcclInt8, comm_, nullptr),
                      "overflow", "count", "size", "large");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclGather(buf_, buf2_, overN, tcclInt8, 0, comm_, nullptr),
                      "overflow", "count", "size", "large");
  }
}

TEST_F(ErrorsTest, InvalidDatatype) {
  const tcclResult_t kBad = tcclInvalidArgument;
  for (int bad : {42, -1, static_cast<int>(tcclNumTypes)}) {
    SCOPED_TRACE("datatype " + std::to_string(bad));
    const auto t = static_cast<tcclDataType_t>(bad);
    EXPECT_TCCL_ERROR(kBad, comm_, tcclSend(buf_, 1, t, rank_, comm_, nullptr), "type");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclRecv(buf_, 1, t, rank_, comm_, nullptr), "type");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclSendRecv(buf_, buf2_, 1, t, rank_, rank_, comm_, nullptr),
                      "type");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclAlltoAll(buf_, buf2_, 1, t, comm_, nullptr), "type");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclGather(buf_, buf2_, 1, t, 0, comm_, nullptr), "type");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclScatter(buf_, buf2_, 1, t, 0, comm_, nullptr), "type");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclNeighborExchange(buf_, buf2_, 1, t, comm_, nullptr), "type");
  }
}

TEST_F(ErrorsTest, PeerOrRootOutOfRange) {
  const tcclResult_t kBad = tcclInvalidArgument;
  for (int bad : {-1, n_, n_ + 100}) {
    SCOPED_TRACE("peer " + std::to_string(bad));
    EXPECT_TCCL_ERROR(kBad, comm_, tcclSend(buf_, 1, tcclInt8, bad, comm_, nullptr), "peer");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclRecv(buf_, 1, tcclInt8, bad, comm_, nullptr), "peer");
    EXPECT_TCCL_ERROR(kBad, comm_,
                      tcclSendRecv(buf_, buf2_, 1, tcclInt8, bad, rank_, comm_, nullptr), "peer");
    EXPECT_TCCL_ERROR(kBad, comm_,
                      tcclSendRecv(buf_, buf2_, 1, tcclInt8, rank_, bad, comm_, nullptr), "peer");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclGather(buf_, buf2_, 1, tcclInt8, bad, comm_, nullptr),
                      "root");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclScatter(buf_, buf2_, 1, tcclInt8, bad, comm_, nullptr),
                      "root");
  }
}

TEST_F(ErrorsTest, InvalidCallInsideGroupDoesNotHang) {
  // The bad call fails at once; the group still ends (with an error or not) and the valid
  // operations issued beside it must not be left half-done on the communicator.
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  EXPECT_TCCL_ERROR(tcclInvalidArgument, comm_,
                    tcclSend(buf_, 1, static_cast<tcclDataType_t>(42), rank_, comm_, nullptr),
                    "type");
  tcclResult_t end = tcclGroupEnd();
  EXPECT_TRUE(end == tcclSuccess || end == tcclInvalidArgument)
      << "tcclGroupEnd after a failed call returned " << tcclGetErrorString(end);
}

TEST_F(ErrorsTest, GroupEndWithoutStart) {
  EXPECT_TCCL_ERROR(tcclInvalidUsage, nullptr, tcclGroupEnd(), "group");
  // Balanced nesting still works afterwards.
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  EXPECT_EQ(tcclGroupEnd(), tcclSuccess);
  EXPECT_EQ(tcclGroupEnd(), tcclSuccess);
  EXPECT_TCCL_ERROR(tcclInvalidUsage, nullptr, tcclGroupEnd(), "group");
}

TEST_F(ErrorsTest, DestroyWithOperationsPendingInOpenGroup) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorldComm(&comm), tcclSuccess) << tcclGetLastError(nullptr);
  GuardedBuffer in(64, MemKind::kHost), out(64, MemKind::kHost);
  in.fillAt(0, 64, DType::kUint8, rank_, 8);
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  EXPECT_EQ(tcclSend(in.data(), 64, tcclUint8, rank_, comm, nullptr), tcclSuccess);
  EXPECT_EQ(tcclRecv(out.data(), 64, tcclUint8, rank_, comm, nullptr), tcclSuccess);
  tcclResult_t res = tcclCommDestroy(comm);
  EXPECT_EQ(res, tcclInvalidUsage);
  EXPECT_TRUE(lastErrorMentions(nullptr, {"group", "pending"}));
  if (res == tcclSuccess) comm = nullptr;  // it is gone; do not touch it again
  // End the group properly: the pending operations run and the communicator is still whole.
  EXPECT_EQ(tcclGroupEnd(), tcclSuccess) << tcclGetLastError(comm);
  std::string why;
  if (comm != nullptr) {
    EXPECT_TRUE(matchesInput(out.view() + GuardedBuffer::kGuard, 64, DType::kUint8, rank_, 8,
                             "self message", &why))
        << why;
    EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess) << tcclGetLastError(nullptr);
  }
}

TEST_F(ErrorsTest, CommInitRankBadArguments) {
  tcclUniqueId id{};
  ASSERT_EQ(tcclGetUniqueId(&id), tcclSuccess) << tcclGetLastError(nullptr);
  tcclComm_t c = nullptr;
  const tcclResult_t kBad = tcclInvalidArgument;
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclCommInitRank(&c, 0, id, 0), "nranks", "rank");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclCommInitRank(&c, -3, id, 0), "nranks", "rank");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclCommInitRank(&c, 1, id, 1), "rank");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclCommInitRank(&c, 2, id, -1), "rank");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclCommInitRank(nullptr, 1, id, 0), "null", "comm", "pointer");
  EXPECT_EQ(c, nullptr);
  tcclComm_t all[2] = {};
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclCommInitAll(nullptr, 1, nullptr), "null", "comm", "pointer");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclCommInitAll(all, 0, nullptr), "ndev", "rank", "count",
                    "number");
}

TEST_F(ErrorsTest, ConfigWithoutMagic) {
  tcclUniqueId id{};
  ASSERT_EQ(tcclGetUniqueId(&id), tcclSuccess) << tcclGetLastError(nullptr);
  tcclConfig_t config = TCCL_CONFIG_INITIALIZER;
  config.magic = 0;
  tcclComm_t c = nullptr;
  // One rank, so a wrong success would not wait for anybody.
  tcclResult_t res = tcclCommInitRankConfig(&c, 1, id, 0, &config);
  EXPECT_EQ(res, tcclInvalidArgument);
  EXPECT_TRUE(lastErrorMentions(nullptr, {"magic", "config"}));
  if (res == tcclSuccess && c != nullptr) tcclCommDestroy(c);
}

TEST_F(ErrorsTest, ErrorStringsAndVersion) {
  for (int r = 0; r <= static_cast<int>(tcclNumResults); r++) {
    const char* s = tcclGetErrorString(static_cast<tcclResult_t>(r));
    ASSERT_NE(s, nullptr);
    EXPECT_GT(std::string(s).size(), 0u) << "result " << r;
  }
  ASSERT_NE(tcclGetErrorString(static_cast<tcclResult_t>(12345)), nullptr);
  int version = 0;
  EXPECT_EQ(tcclGetVersion(&version), tcclSuccess);
  EXPECT_EQ(version, TCCL_VERSION_CODE);
}

}  // namespace
}  // namespace p2p
}  // namespace test
}  // namespace tccl
