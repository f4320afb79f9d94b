/*
 * tests/ring/ring_errors_test.cc: bad input to the collectives and to the custom reductions
 * gives the exact error code and a message that says what was wrong; nothing hangs.
 *
 * What it is: the argument checks of chapter 2 (collectives.cc, red_op.cc): null communicator,
 * invalid reduction op, invalid data type, a premulsum op used with another data type or on
 * another communicator, destroying a built-in op, destroying twice, using a destroyed op, bad
 * tcclRedOpCreatePreMulSum arguments, roots out of range, null buffers with a count, counts
 * whose byte size overflows (count x nranks for the gathered side of AllGather and
 * ReduceScatter), and a group that mixes host and device buffers (with a GPU). Also the valid
 * corner cases next to them: null buffers with count 0, and null buffers where they are not
 * significant (Broadcast's sendbuff and Reduce's recvbuff on non-root ranks).
 *
 * Invariants: every rank makes the same calls, so every invalid call fails on every rank
 * before any communication and never leaves a peer waiting; calls that are invalid on one rank
 * only (a null sendbuff on the Broadcast root) are made only when there is one rank. After
 * each test a valid collective on the same communicator must still work (TearDown).
 *
 * NCCL counterpart: src/enqueue.cc (ArgsCheck), src/init.cc (ncclRedOpCreatePreMulSum,
 * ncclRedOpDestroy).
 * Added in: stage 2.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "ring_case.h"

namespace tccl {
namespace test {
namespace ring {
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

constexpr tcclResult_t kBad = tcclInvalidArgument;

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
    static const Inputs in(worldSize(), true, 3, 64);
    CaseResult r = runCase(comm_, in,
                           Case{Coll::kAllReduce, DType::kInt32, builtinOp(RedOp::kSum), 33,
                                Place::kOutOfPlace, 0, MemKind::kHost});
    EXPECT_TRUE(r.ok) << "communicator broken after the test: " << r.why;
    allRanksOk(r.ok);
  }

  /// Calls `fn(op)` for AllReduce, ReduceScatter and Reduce, the three calls that take an op.
  template <typename Check>
  void forEachReducing(tcclRedOp_t op, tcclDataType_t t, Check check) {
    check("tcclAllReduce", tcclAllReduce(buf_, buf2_, 4, t, op, comm_, nullptr));
    check("tcclReduceScatter", tcclReduceScatter(buf_, buf2_, 1, t, op, comm_, nullptr));
    check("tcclReduce", tcclReduce(buf_, buf2_, 4, t, op, 0, comm_, nullptr));
  }

  static tcclComm_t comm_;
  static tcclResult_t initResult_;
  int rank_ = 0, n_ = 1;
  alignas(16) char buf_[1024] = {};
  alignas(16) char buf2_[1024] = {};
};
tcclComm_t ErrorsTest::comm_ = nullptr;
tcclResult_t ErrorsTest::initResult_ = tcclSuccess;

TEST_F(ErrorsTest, NullCommunicator) {
  EXPECT_TCCL_ERROR(kBad, nullptr,
                    tcclAllReduce(buf_, buf2_, 1, tcclInt8, tcclSum, nullptr, nullptr), "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclAllGather(buf_, buf2_, 1, tcclInt8, nullptr, nullptr),
                    "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr,
                    tcclReduceScatter(buf_, buf2_, 1, tcclInt8, tcclSum, nullptr, nullptr), "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclBroadcast(buf_, buf2_, 1, tcclInt8, 0, nullptr, nullptr),
                    "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr,
                    tcclReduce(buf_, buf2_, 1, tcclInt8, tcclSum, 0, nullptr, nullptr), "comm");
  float scalar = 2;
  tcclRedOp_t op;
  EXPECT_TCCL_ERROR(
      kBad, nullptr,
      tcclRedOpCreatePreMulSum(&op, &scalar, tcclFloat32, tcclScalarHostImmediate, nullptr),
      "comm");
  EXPECT_TCCL_ERROR(kBad, nullptr, tcclRedOpDestroy(tcclRedOp_t(tcclNumOps), nullptr), "comm");
}

TEST_F(ErrorsTest, InvalidReductionOp) {
  // No premulsum op exists on the communicator, so tcclNumOps and above are invalid too.
  for (int op : {99, -1, int(tcclNumOps), int(tcclNumOps) + 1, int(tcclMaxRedOp)}) {
    forEachReducing(tcclRedOp_t(op), tcclFloat32, [&](const char* call, tcclResult_t r) {
      EXPECT_EQ(r, kBad) << call << " with op " << op;
      EXPECT_TRUE(lastErrorMentions(comm_, {"op"})) << call << " with op " << op;
    });
  }
}

TEST_F(ErrorsTest, InvalidDataType) {
  for (int t : {int(tcclNumTypes), 255, -1}) {
    const tcclDataType_t dt = tcclDataType_t(t);
    forEachReducing(tcclSum, dt, [&](const char* call, tcclResult_t r) {
      EXPECT_EQ(r, kBad) << call << " with type " << t;
      EXPECT_TRUE(lastErrorMentions(comm_, {"type"})) << call << " with type " << t;
    });
    EXPECT_TCCL_ERROR(kBad, comm_, tcclAllGather(buf_, buf2_, 1, dt, comm_, nullptr), "type");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclBroadcast(buf_, buf2_, 1, dt, 0, comm_, nullptr), "type");
  }
}

TEST_F(ErrorsTest, PreMulSumWithAnotherDataType) {
  float scalar = 2;
  tcclRedOp_t op;
  ASSERT_EQ(tcclRedOpCreatePreMulSum(&op, &scalar, tcclFloat32, tcclScalarHostImmediate, comm_),
            tcclSuccess);
  for (tcclDataType_t t : {tcclFloat64, tcclFloat16, tcclBfloat16, tcclInt32, tcclUint8}) {
    forEachReducing(op, t, [&](const char* call, tcclResult_t r) {
      EXPECT_EQ(r, kBad) << call << " with type " << int(t);
      EXPECT_TRUE(lastErrorMentions(comm_, {"type"})) << call << " with type " << int(t);
    });
  }
  // With its own type it is fine.
  EXPECT_EQ(tcclAllReduce(buf_, buf2_, 4, tcclFloat32, op, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_EQ(tcclRedOpDestroy(op, comm_), tcclSuccess);
}

TEST_F(ErrorsTest, PreMulSumFromAnotherCommunicator) {
  tcclComm_t other = nullptr;
  ASSERT_EQ(initWorldComm(&other), tcclSuccess) << tcclGetLastError(nullptr);
  double scalar = 3;
  tcclRedOp_t op;
  ASSERT_EQ(tcclRedOpCreatePreMulSum(&op, &scalar, tcclFloat64, tcclScalarHostImmediate, other),
            tcclSuccess);
  // comm_ has no op of that value: the op belongs to `other` only.
  forEachReducing(op, tcclFloat64, [&](const char* call, tcclResult_t r) {
    EXPECT_EQ(r, kBad) << call;
    EXPECT_TRUE(lastErrorMentions(comm_, {"op"})) << call;
  });
  EXPECT_TCCL_ERROR(kBad, comm_, tcclRedOpDestroy(op, comm_), "op", "exist");
  EXPECT_EQ(tcclRedOpDestroy(op, other), tcclSuccess) << tcclGetLastError(other);
  EXPECT_EQ(tcclCommDestroy(other), tcclSuccess);
}

TEST_F(ErrorsTest, DestroyBuiltinOp) {
  for (tcclRedOp_t op : {tcclSum, tcclProd, tcclMax, tcclMin, tcclAvg}) {
    EXPECT_TCCL_ERROR(kBad, comm_, tcclRedOpDestroy(op, comm_), "built-in", "builtin");
  }
  for (int op : {-1, 99, int(tcclMaxRedOp)}) {
    EXPECT_TCCL_ERROR(kBad, comm_, tcclRedOpDestroy(tcclRedOp_t(op), comm_), "op");
  }
}

TEST_F(ErrorsTest, DestroyTwiceAndUseAfterDestroy) {
  int32_t scalar = 3;
  tcclRedOp_t op;
  ASSERT_EQ(tcclRedOpCreatePreMulSum(&op, &scalar, tcclInt32, tcclScalarHostImmediate, comm_),
            tcclSuccess);
  EXPECT_GE(int(op), int(tcclNumOps)) << "a premulsum op must not look like a built-in";
  EXPECT_EQ(tcclRedOpDestroy(op, comm_), tcclSuccess) << tcclGetLastError(comm_);
  EXPECT_TCCL_ERROR(kBad, comm_, tcclRedOpDestroy(op, comm_), "op", "exist");
  forEachReducing(op, tcclInt32, [&](const char* call, tcclResult_t r) {
    EXPECT_EQ(r, kBad) << call << " with a destroyed op";
    EXPECT_TRUE(lastErrorMentions(comm_, {"op"})) << call;
  });
}

TEST_F(ErrorsTest, CreatePreMulSumBadArguments) {
  float scalar = 2;
  tcclRedOp_t op = tcclSum;
  EXPECT_TCCL_ERROR(
      kBad, comm_,
      tcclRedOpCreatePreMulSum(nullptr, &scalar, tcclFloat32, tcclScalarHostImmediate, comm_),
      "null", "op");
  EXPECT_TCCL_ERROR(
      kBad, comm_,
      tcclRedOpCreatePreMulSum(&op, nullptr, tcclFloat32, tcclScalarHostImmediate, comm_), "null",
      "scalar");
  EXPECT_TCCL_ERROR(kBad, comm_,
                    tcclRedOpCreatePreMulSum(&op, &scalar, tcclDataType_t(tcclNumTypes),
                                             tcclScalarHostImmediate, comm_),
                    "type");
  EXPECT_TCCL_ERROR(
      kBad, comm_,
      tcclRedOpCreatePreMulSum(&op, &scalar, tcclFloat32, tcclScalarResidence_t(7), comm_),
      "residence");
  EXPECT_EQ(op, tcclSum) << "a failed create must not write an op";
}

TEST_F(ErrorsTest, RootOutOfRange) {
  for (int root : {-1, n_, n_ + 5}) {
    EXPECT_TCCL_ERROR(kBad, comm_, tcclBroadcast(buf_, buf2_, 4, tcclInt32, root, comm_, nullptr),
                      "root");
    EXPECT_TCCL_ERROR(kBad, comm_,
                      tcclReduce(buf_, buf2_, 4, tcclInt32, tcclSum, root, comm_, nullptr), "root");
  }
}

TEST_F(ErrorsTest, NullBufferWithCount) {
  const tcclDataType_t t = tcclFloat32;
  EXPECT_TCCL_ERROR(kBad, comm_, tcclAllReduce(nullptr, buf2_, 4, t, tcclSum, comm_, nullptr),
                    "null");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclAllReduce(buf_, nullptr, 4, t, tcclSum, comm_, nullptr),
                    "null");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclAllGather(nullptr, buf2_, 4, t, comm_, nullptr), "null");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclAllGather(buf_, nullptr, 4, t, comm_, nullptr), "null");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclReduceScatter(nullptr, buf2_, 4, t, tcclSum, comm_, nullptr),
                    "null");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclReduceScatter(buf_, nullptr, 4, t, tcclSum, comm_, nullptr),
                    "null");
  // recvbuff is significant on every rank for Broadcast, sendbuff for Reduce.
  EXPECT_TCCL_ERROR(kBad, comm_, tcclBroadcast(buf_, nullptr, 4, t, 0, comm_, nullptr), "null");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclReduce(nullptr, buf2_, 4, t, tcclSum, 0, comm_, nullptr),
                    "null");
  if (n_ == 1) {
    // On the root only (with more ranks the others would wait for it).
    EXPECT_TCCL_ERROR(kBad, comm_, tcclBroadcast(nullptr, buf2_, 4, t, 0, comm_, nullptr), "null");
    EXPECT_TCCL_ERROR(kBad, comm_, tcclReduce(buf_, nullptr, 4, t, tcclSum, 0, comm_, nullptr),
                      "null");
  }
}

TEST_F(ErrorsTest, CountOverflow) {
  // count x sizeof(float) overflows size_t.
  const size_t huge = SIZE_MAX / 2;
  EXPECT_TCCL_ERROR(kBad, comm_,
                    tcclAllReduce(buf_, buf2_, huge, tcclFloat32, tcclSum, comm_, nullptr),
                    "overflow");
  EXPECT_TCCL_ERROR(kBad, comm_, tcclBroadcast(buf_, buf2_, huge, tcclFloat32, 0, comm_, nullptr),
                    "overflow");
  EXPECT_TCCL_ERROR(kBad, comm_,
                    tcclReduce(buf_, buf2_, huge, tcclFloat32, tcclSum, 0, comm_, nullptr),
                    "overflow");
  // One rank's block fits, nranks blocks do not (with one rank: the block itself overflows).
  const size_t perRank = SIZE_MAX / sizeof(int32_t) / size_t(n_) + 1;
  EXPECT_TCCL_ERROR(kBad, comm_, tcclAllGather(buf_, buf2_, perRank, tcclInt32, comm_, nullptr),
                    "overflow");
  EXPECT_TCCL_ERROR(kBad, comm_,
                    tcclReduceScatter(buf_, buf2_, perRank, tcclInt32, tcclSum, comm_, nullptr),
                    "overflow");
}

TEST_F(ErrorsTest, NullBuffersWithZeroCount) {
  // Nothing to move: null buffers are fine (as in NCCL), and the call completes on every rank.
  EXPECT_EQ(tcclAllReduce(nullptr, nullptr, 0, tcclFloat32, tcclSum, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_EQ(tcclAllGather(nullptr, nullptr, 0, tcclInt8, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_EQ(tcclReduceScatter(nullptr, nullptr, 0, tcclInt64, tcclMax, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_EQ(tcclBroadcast(nullptr, nullptr, 0, tcclFloat16, n_ - 1, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
  EXPECT_EQ(tcclReduce(nullptr, nullptr, 0, tcclBfloat16, tcclAvg, 0, comm_, nullptr), tcclSuccess)
      << tcclGetLastError(comm_);
}

TEST_F(ErrorsTest, RootOnlyBuffersMayBeNullElsewhere) {
  // Broadcast's sendbuff and Reduce's recvbuff are read/written on the root only (tccl.h):
  // the other ranks may pass NULL, and the results are still right.
  const size_t count = 1000;
  const int root = n_ - 1;
  const DType t = DType::kInt32;
  std::vector<int32_t> send(count), recv(count, -1), expected(count);
  fillInput(send.data(), count, t, rank_, 5);
  ASSERT_EQ(tcclBroadcast(rank_ == root ? send.data() : nullptr, recv.data(), count, tcclInt32,
                          root, comm_, nullptr),
            tcclSuccess)
      << tcclGetLastError(comm_);
  fillInput(expected.data(), count, t, root, 5);
  EXPECT_EQ(recv, expected) << "broadcast with NULL sendbuff on non-roots";
  std::fill(recv.begin(), recv.end(), -1);
  ASSERT_EQ(tcclReduce(send.data(), rank_ == root ? recv.data() : nullptr, count, tcclInt32,
                       tcclSum, root, comm_, nullptr),
            tcclSuccess)
      << tcclGetLastError(comm_);
  if (rank_ == root) {
    referenceReduce(expected.data(), count, t, RedOp::kSum, n_, 5);
    EXPECT_EQ(recv, expected) << "reduce with NULL recvbuff on non-roots";
  }
}

TEST_F(ErrorsTest, GroupMixingHostAndDeviceBuffers) {
  if (!haveGpu()) GTEST_SKIP() << "needs a GPU";
  CollBuffer host(64, MemKind::kHost), dev(64, MemKind::kDevice);
  EXPECT_EQ(tcclGroupStart(), tcclSuccess);
  EXPECT_EQ(tcclAllReduce(host.data(), host.data(), 16, tcclFloat32, tcclSum, comm_, nullptr),
            tcclSuccess);
  EXPECT_EQ(tcclAllReduce(dev.data(), dev.data(), 16, tcclFloat32, tcclSum, comm_, nullptr),
            tcclSuccess);
  EXPECT_TCCL_ERROR(tcclInvalidUsage, comm_, tcclGroupEnd(), "host", "device");
  deviceSync();
}

}  // namespace
}  // namespace ring
}  // namespace test
}  // namespace tccl
