/*
 * tests/shim/test_shim.cc: an NCCL program, run on tccl through the nccl.h shim.
 *
 * What it is: the shim's test, written the way an NCCL user writes code: it includes nccl.h
 * (the shim's) and never tccl.h, links libnccl.so (the shim) and nothing of tccl directly.
 * Under mpirun at 1..4 ranks it creates a communicator as nccl-tests does (ncclGetUniqueId on
 * rank 0, MPI_Bcast, ncclCommInitRank), runs every collective and a send/recv ring with their
 * results checked against the harness's CPU references, and checks what is more than a rename
 * in the shim: config conversion, ncclCommInitRank inside a group (one rank per process, and
 * several ranks per process from one thread, as nccl-tests -g 2), errors passed through with
 * their messages, and the calls tccl does not implement failing loudly.
 *
 * Invariants: every rank makes the same calls in the same order; calls meant to fail fail
 * locally, before any communication. Buffers are host memory, plus device memory where the
 * harness finds a GPU.
 *
 * NCCL counterpart: nccl-tests (src/common.cu: initComms, startColl) in miniature.
 * Added in: stage 2.
 */
#include <gtest/gtest.h>

#include <cstdlib>

#include <cstring>
#include <string>
#include <vector>

#include "nccl.h"
#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace {

DType dtypeOf(ncclDataType_t t) { return static_cast<DType>(static_cast<int>(t)); }
RedOp redOpOf(ncclRedOp_t op) { return static_cast<RedOp>(static_cast<int>(op)); }

/// True when ncclGetLastError(NULL) contains `word`.
::testing::AssertionResult lastErrorMentions(const char* word) {
  std::string msg = ncclGetLastError(nullptr);
  if (msg.find(word) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "ncclGetLastError \"" << msg << "\" lacks \"" << word << "\"";
}

/// A unique id made on world rank 0 and broadcast, as nccl-tests does.
ncclUniqueId worldUniqueId() {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  ncclResult_t res = ncclSuccess;
  if (worldRank() == 0) res = ncclGetUniqueId(&id);
  EXPECT_EQ(res, ncclSuccess) << ncclGetLastError(nullptr);
  bcast(&id, sizeof(id), 0);
  return id;
}

/// Downloads `b` and compares `count` elements with `expected`.
::testing::AssertionResult holds(const Buffer& b, const void* expected, size_t count, DType t,
                                 double tol) {
  deviceSync();
  std::vector<char> got(count * dtypeSize(t));
  b.download(got.data(), got.size());
  std::string why;
  if (compare(got.data(), expected, count, t, tol, &why)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << dtypeName(t) << ": " << why;
}

/// A buffer of `count` elements filled with rank `rank`'s input.
void fill(Buffer& b, size_t count, DType t, int rank, int seed) {
  std::vector<char> host(count * dtypeSize(t));
  fillInput(host.data(), count, t, rank, seed);
  b.upload(host.data(), host.size());
}

class ShimTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ncclUniqueId id = worldUniqueId();
    initResult_ = ncclCommInitRank(&comm_, worldSize(), id, worldRank());
  }
  static void TearDownTestSuite() {
    if (comm_) {
      EXPECT_EQ(ncclCommDestroy(comm_), ncclSuccess);
    }
    comm_ = nullptr;
  }
  void SetUp() override {
    ASSERT_EQ(initResult_, ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_NE(comm_, nullptr);
  }
  static ncclComm_t comm_;
  static ncclResult_t initResult_;
};
ncclComm_t ShimTest::comm_ = nullptr;
ncclResult_t ShimTest::initResult_ = ncclSuccess;

constexpr size_t kCount = 4099;  // odd: no chunk or slice size divides it
const ncclDataType_t kTypes[] = {ncclInt32, ncclFloat32, ncclBfloat16};

TEST(ShimVersion, ClaimsNccl2183) {
  EXPECT_EQ(NCCL_VERSION_CODE, 21904);
  EXPECT_EQ(NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_VERSION_CODE);
  EXPECT_EQ(NCCL_VERSION(2, 4, 0), 2400);  // NCCL's pre-2.9 encoding
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  version = 0;
  ASSERT_EQ(pncclGetVersion(&version), ncclSuccess);  // the profiling twin
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  EXPECT_EQ(sizeof(ncclUniqueId), 128u);
}

TEST(ShimErrors, ErrorStringsForEveryResult) {
  for (int r = ncclSuccess; r < ncclNumResults; r++) {
    const char* s = ncclGetErrorString(static_cast<ncclResult_t>(r));
    ASSERT_NE(s, nullptr);
    EXPECT_GT(strlen(s), 0u) << "result " << r;
  }
  EXPECT_STRNE(ncclGetErrorString(ncclInvalidArgument), ncclGetErrorString(ncclInvalidUsage));
}

TEST_F(ShimTest, CommunicatorQueries) {
  int count = 0, rank = -1, dev = -2;
  ASSERT_EQ(ncclCommCount(comm_, &count), ncclSuccess);
  ASSERT_EQ(ncclCommUserRank(comm_, &rank), ncclSuccess);
  ASSERT_EQ(ncclCommCuDevice(comm_, &dev), ncclSuccess);
  EXPECT_EQ(count, worldSize());
  EXPECT_EQ(rank, worldRank());
  EXPECT_GE(dev, haveGpu() ? 0 : -1);
  ncclResult_t async = ncclInternalError;
  ASSERT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
}

TEST_F(ShimTest, AllReduceSumAndAvg) {
  const int n = worldSize();
  for (MemKind kind : memKinds()) {
    for (ncclDataType_t type : kTypes) {
      for (ncclRedOp_t op : {ncclSum, ncclAvg}) {
        const DType t = dtypeOf(type);
        Buffer send(kCount * dtypeSize(t), kind), recv(kCount * dtypeSize(t), kind);
        fill(send, kCount, t, worldRank(), 3);
        recv.poison();
        ASSERT_EQ(ncclAllReduce(send.data(), recv.data(), kCount, type, op, comm_, nullptr),
                  ncclSuccess)
            << ncclGetLastError(comm_);
        std::vector<char> expected(kCount * dtypeSize(t));
        referenceReduce(expected.data(), kCount, t, redOpOf(op), n, 3);
        EXPECT_TRUE(holds(recv, expected.data(), kCount, t, tolerance(t, redOpOf(op), n)))
            << redOpName(redOpOf(op)) << " " << memKindName(kind);
      }
    }
  }
}

TEST_F(ShimTest, AllGatherAndReduceScatter) {
  const int n = worldSize(), me = worldRank();
  for (MemKind kind : memKinds()) {
    for (ncclDataType_t type : kTypes) {
      const DType t = dtypeOf(type);
      const size_t es = dtypeSize(t);
      // AllGather: block r of the result is rank r's input.
      Buffer send(kCount * es, kind), recv(n * kCount * es, kind);
      fill(send, kCount, t, me, 5);
      recv.poison();
      ASSERT_EQ(ncclAllGather(send.data(), recv.data(), kCount, type, comm_, nullptr), ncclSuccess)
          << ncclGetLastError(comm_);
      std::vector<char> expected(n * kCount * es);
      for (int r = 0; r < n; r++) fillInput(expected.data() + r * kCount * es, kCount, t, r, 5);
      EXPECT_TRUE(holds(recv, expected.data(), n * kCount, t, 0)) << "allgather";

      // ReduceScatter: rank `me` gets block `me` of the sum over ranks.
      Buffer big(n * kCount * es, kind), mine(kCount * es, kind);
      fill(big, n * kCount, t, me, 7);
      mine.poison();
      ASSERT_EQ(ncclReduceScatter(big.data(), mine.data(), kCount, type, ncclSum, comm_, nullptr),
                ncclSuccess)
          << ncclGetLastError(comm_);
      std::vector<char> block(kCount * es);
      referenceReduce(block.data(), kCount, t, RedOp::kSum, n, 7, me * kCount);
      EXPECT_TRUE(holds(mine, block.data(), kCount, t, tolerance(t, RedOp::kSum, n)))
          << "reducescatter";
    }
  }
}

TEST_F(ShimTest, BroadcastAndReduceFromEveryRoot) {
  const int n = worldSize(), me = worldRank();
  const ncclDataType_t type = ncclFloat32;
  const DType t = dtypeOf(type);
  for (MemKind kind : memKinds()) {
    for (int root = 0; root < n; root++) {
      Buffer send(kCount * 4, kind), recv(kCount * 4, kind);
      fill(send, kCount, t, me, 11 + root);
      recv.poison();
      ASSERT_EQ(ncclBroadcast(send.data(), recv.data(), kCount, type, root, comm_, nullptr),
                ncclSuccess)
          << ncclGetLastError(comm_);
      std::vector<char> expected(kCount * 4);
      fillInput(expected.data(), kCount, t, root, 11 + root);
      EXPECT_TRUE(holds(recv, expected.data(), kCount, t, 0)) << "broadcast root " << root;

      // The legacy in-place form.
      fill(send, kCount, t, me, 11 + root);
      ASSERT_EQ(ncclBcast(send.data(), kCount, type, root, comm_, nullptr), ncclSuccess);
      EXPECT_TRUE(holds(send, expected.data(), kCount, t, 0)) << "bcast root " << root;

      fill(send, kCount, t, me, 13 + root);
      recv.poison();
      ASSERT_EQ(ncclReduce(send.data(), recv.data(), kCount, type, ncclMax, root, comm_, nullptr),
                ncclSuccess)
          << ncclGetLastError(comm_);
      if (me == root) {
        referenceReduce(expected.data(), kCount, t, RedOp::kMax, n, 13 + root);
        EXPECT_TRUE(holds(recv, expected.data(), kCount, t, 0)) << "reduce root " << root;
      }
    }
  }
}

TEST_F(ShimTest, SendRecvRing) {
  const int n = worldSize(), me = worldRank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  const DType t = DType::kInt64;
  for (MemKind kind : memKinds()) {
    Buffer send(kCount * 8, kind), recv(kCount * 8, kind);
    fill(send, kCount, t, me, 19);
    recv.poison();
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclSend(send.data(), kCount, ncclInt64, next, comm_, nullptr), ncclSuccess);
    ASSERT_EQ(ncclRecv(recv.data(), kCount, ncclInt64, prev, comm_, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm_);
    std::vector<char> expected(kCount * 8);
    fillInput(expected.data(), kCount, t, prev, 19);
    EXPECT_TRUE(holds(recv, expected.data(), kCount, t, 0)) << memKindName(kind);
  }
}

TEST_F(ShimTest, PreMulSum) {
  const int n = worldSize(), me = worldRank();
  // Each rank scales its input by (rank + 1): the result is sum over r of (r+1) * x_r.
  float scalar = float(me + 1);
  ncclRedOp_t op = ncclSum;
  ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm_),
            ncclSuccess)
      << ncclGetLastError(comm_);
  EXPECT_GE(int(op), int(ncclNumOps));
  scalar = 1000;  // "host immediate": the value was read at creation
  Buffer send(kCount * 4, MemKind::kHost), recv(kCount * 4, MemKind::kHost);
  fill(send, kCount, DType::kFloat32, me, 23);
  recv.poison();
  ASSERT_EQ(ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, op, comm_, nullptr),
            ncclSuccess)
      << ncclGetLastError(comm_);
  std::vector<float> expected(kCount, 0.0f);
  for (size_t i = 0; i < kCount; i++) {
    for (int r = 0; r < n; r++) expected[i] += float(r + 1) * inputValue(i, DType::kFloat32, r, 23);
  }
  EXPECT_TRUE(holds(recv, expected.data(), kCount, DType::kFloat32, 0));
  ASSERT_EQ(ncclRedOpDestroy(op, comm_), ncclSuccess);
  // A destroyed op is refused, locally, with tccl's message passed through.
  EXPECT_EQ(ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, op, comm_, nullptr),
            ncclInvalidArgument);
  EXPECT_TRUE(lastErrorMentions("reduction operation"));
}

TEST_F(ShimTest, InvalidArgumentsPassThrough) {
  Buffer buf(64, MemKind::kHost);
  EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), 4, ncclFloat32, ncclSum, nullptr, nullptr),
            ncclInvalidArgument);
  EXPECT_TRUE(lastErrorMentions("NULL"));
  EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), 4, ncclNumTypes, ncclSum, comm_, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclSend(buf.data(), 4, ncclInt8, worldSize(), comm_, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommCount(comm_, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_TRUE(lastErrorMentions("ncclGetVersion"));
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);  // no group open
  // The communicator still works after all that.
  int count = 0;
  EXPECT_EQ(ncclCommCount(comm_, &count), ncclSuccess);
  EXPECT_EQ(count, worldSize());
}

TEST(ShimConfig, BadConfigsAreRefused) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);  // a private id: nothing here communicates
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0x12345678;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument);
  EXPECT_TRUE(lastErrorMentions("NCCL_CONFIG_INITIALIZER"));
  EXPECT_EQ(comm, nullptr);
  // Non-blocking communicators: tccl refuses them until stage 7, saying so. (A stage that
  // honours them must return a communicator that works once it is ready.)
  ncclConfig_t nb = NCCL_CONFIG_INITIALIZER;
  nb.blocking = 0;
  ncclResult_t res = ncclCommInitRankConfig(&comm, 1, id, 0, &nb);
  if (res == ncclInvalidUsage) {
    EXPECT_TRUE(lastErrorMentions("blocking"));
  } else {
    ASSERT_TRUE(res == ncclSuccess || res == ncclInProgress) << ncclGetErrorString(res);
    ncclResult_t async = ncclInProgress;
    while (async == ncclInProgress) ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  }
}

TEST(ShimConfig, WorldCommunicatorFromConfig) {
  ncclUniqueId id = worldUniqueId();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.minCTAs = 1;
  config.maxCTAs = 2;
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&comm, worldSize(), id, worldRank(), &config), ncclSuccess)
      << ncclGetLastError(nullptr);
  std::vector<int32_t> in(kCount), out(kCount, -1), expected(kCount);
  fillInput(in.data(), kCount, DType::kInt32, worldRank(), 29);
  referenceReduce(expected.data(), kCount, DType::kInt32, RedOp::kSum, worldSize(), 29);
  ASSERT_EQ(ncclAllReduce(in.data(), out.data(), kCount, ncclInt32, ncclSum, comm, nullptr),
            ncclSuccess);
  EXPECT_EQ(out, expected);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// Stage 3 on: the shim copies NCCL_ALGO into TCCL_ALGO when libnccl.so.2 loads. Run with
// NCCL_ALGO=tree,bogus and TCCL_SHIM_EXPECT_BAD_ALGO=1 (shim_tests.cmake): the unknown name
// must reach tccl, which refuses it at init; otherwise (every other run) there is nothing to see.
TEST(ShimKnobs, NcclAlgoReachesTccl) {
  if (getenv("TCCL_SHIM_EXPECT_BAD_ALGO") == nullptr) GTEST_SKIP() << "NCCL_ALGO not set here";
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_TRUE(lastErrorMentions("bogus"));
}

TEST(ShimNotImplemented, SplitAndFinalizeSaySo) {
  ncclComm_t newcomm = reinterpret_cast<ncclComm_t>(&newcomm);  // garbage the call must clear
  EXPECT_EQ(ncclCommSplit(nullptr, 0, 0, &newcomm, nullptr), ncclInvalidUsage);
  EXPECT_EQ(newcomm, nullptr);
  EXPECT_TRUE(lastErrorMentions("not implemented"));
  EXPECT_EQ(ncclCommFinalize(nullptr), ncclInvalidUsage);
  EXPECT_TRUE(lastErrorMentions("ncclCommFinalize"));
}

// nccl-tests with one GPU per process: ncclCommInitRank between ncclGroupStart and End.
TEST(ShimGroupInit, OneRankPerProcessInsideAGroup) {
  ncclUniqueId id = worldUniqueId();
  ncclComm_t comm = reinterpret_cast<ncclComm_t>(&id);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&comm, worldSize(), id, worldRank()), ncclSuccess);
  EXPECT_EQ(comm, nullptr);  // created at ncclGroupEnd
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_NE(comm, nullptr);
  int rank = -1;
  EXPECT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
  EXPECT_EQ(rank, worldRank());
  int64_t x = worldRank() + 1, sum = 0;
  ASSERT_EQ(ncclAllReduce(&x, &sum, 1, ncclInt64, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(sum, int64_t(worldSize()) * (worldSize() + 1) / 2);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// nccl-tests -g 2: one thread creates two ranks of one communicator in a group. Created in
// place, the first would wait for the second forever; the shim defers both to ncclGroupEnd.
TEST(ShimGroupInit, TwoRanksPerProcessFromOneThread) {
  if (haveGpu()) GTEST_SKIP() << "needs two GPUs per process; host-only here";
  const int nranks = 2 * worldSize();
  ncclUniqueId id = worldUniqueId();
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ(ncclCommInitRank(&comms[i], nranks, id, 2 * worldRank() + i), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_NE(comms[0], nullptr);
  ASSERT_NE(comms[1], nullptr);
  std::vector<float> in[2], out[2];
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < 2; i++) {
    in[i].resize(kCount);
    out[i].assign(kCount, -1.0f);
    fillInput(in[i].data(), kCount, DType::kFloat32, 2 * worldRank() + i, 31);
    ASSERT_EQ(
        ncclAllReduce(in[i].data(), out[i].data(), kCount, ncclFloat32, ncclSum, comms[i], nullptr),
        ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<float> expected(kCount);
  referenceReduce(expected.data(), kCount, DType::kFloat32, RedOp::kSum, nranks, 31);
  for (int i = 0; i < 2; i++) {
    std::string why;
    EXPECT_TRUE(compare(out[i].data(), expected.data(), kCount, DType::kFloat32,
                        tolerance(DType::kFloat32, RedOp::kSum, nranks), &why))
        << "rank " << 2 * worldRank() + i << ": " << why;
    EXPECT_EQ(ncclCommDestroy(comms[i]), ncclSuccess);
  }
}

TEST(ShimGroupInit, DeferredFailureIsReportedAtGroupEnd) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&comm, 2, id, 5), ncclSuccess);  // rank out of range: seen later
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_TRUE(lastErrorMentions("deferred"));
  EXPECT_TRUE(lastErrorMentions("out of range"));  // tccl's reason, from the worker thread
}

TEST(ShimInitAll, TwoLocalRanks) {
  if (haveGpu()) GTEST_SKIP() << "ncclCommInitAll(2) needs two GPUs; host-only here";
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  double x[2] = {1.5, 2.25}, y[2] = {0, 0};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ(pncclAllReduce(&x[i], &y[i], 1, ncclDouble, ncclSum, comms[i], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_EQ(y[0], 3.75);
  EXPECT_EQ(y[1], 3.75);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
}  // namespace test
}  // namespace tccl
