/*
 * tests/ring/ring_redop_test.cc: what the custom reductions promise, beyond their results.
 *
 * What it is: the semantics of tcclRedOpCreatePreMulSum / tcclRedOpDestroy and of tcclAvg
 * (red_op.cc), which the sweep's result checks alone do not pin down:
 *  - tcclScalarHostImmediate reads the scalar once, at creation;
 *  - tcclScalarDevice reads it when the operation runs (a GPU only): a new value written to
 *    the device scalar after creation is the one used, on device and on host buffers;
 *  - several premulsum ops live at once, each with its own scalar; slots freed by
 *    tcclRedOpDestroy are reused and the new op uses its own scalar;
 *  - float avg is premulsum by 1/nranks rounded to the type (NCCL's definition, float16.h's
 *    accuracy rule): its result is bit for bit that of a premulsum op with that scalar.
 *
 * Invariants: every rank makes the same calls; results are exact integers (or bit-compared
 * between two runs of the same ring), so no tolerance is involved.
 *
 * NCCL counterpart: src/enqueue.cc (hostToDevRedOp), src/init.cc (ncclRedOpCreatePreMulSum).
 * Added in: stage 2.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ring_case.h"

namespace tccl {
namespace test {
namespace ring {
namespace {

constexpr size_t kCount = 4099;
constexpr int kSeed = 31;

class RedOpTest : public ::testing::TestWithParam<MemKind> {
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
    n_ = worldSize();
    rank_ = worldRank();
  }

  /// AllReduce of this rank's int32 input (harness values) with `op`; returns the result.
  std::vector<int32_t> allReduceInt32(tcclRedOp_t op) {
    std::vector<int32_t> in(kCount);
    fillInput(in.data(), kCount, DType::kInt32, rank_, kSeed);
    CollBuffer send(kCount * 4, GetParam()), recv(kCount * 4, GetParam());
    send.write(0, in.data(), kCount * 4);
    EXPECT_EQ(tcclAllReduce(send.data(), recv.data(), kCount, tcclInt32, op, comm_, nullptr),
              tcclSuccess)
        << tcclGetLastError(comm_);
    deviceSync();
    std::vector<int32_t> out(kCount);
    std::memcpy(out.data(), recv.view() + CollBuffer::kGuard, kCount * 4);
    return out;
  }

  /// scalar x (sum over ranks of the harness's int32 inputs).
  std::vector<int32_t> expectedScaled(int32_t scalar) const {
    std::vector<int32_t> sum(kCount);
    referenceReduce(sum.data(), kCount, DType::kInt32, RedOp::kSum, n_, kSeed);
    for (int32_t& v : sum) v *= scalar;
    return sum;
  }

  static tcclComm_t comm_;
  static tcclResult_t initResult_;
  int n_ = 1, rank_ = 0;
};
tcclComm_t RedOpTest::comm_ = nullptr;
tcclResult_t RedOpTest::initResult_ = tcclSuccess;

TEST_P(RedOpTest, HostImmediateScalarIsReadAtCreation) {
  int32_t scalar = 3;
  tcclRedOp_t op;
  ASSERT_EQ(tcclRedOpCreatePreMulSum(&op, &scalar, tcclInt32, tcclScalarHostImmediate, comm_),
            tcclSuccess);
  scalar = 5;  // too late: the op holds 3
  EXPECT_EQ(allReduceInt32(op), expectedScaled(3));
  EXPECT_EQ(tcclRedOpDestroy(op, comm_), tcclSuccess);
}

TEST_P(RedOpTest, DeviceScalarIsReadWhenTheOperationRuns) {
  if (!haveGpu()) GTEST_SKIP() << "tcclScalarDevice needs a GPU";
  Buffer scalar(sizeof(int32_t), MemKind::kDevice);
  const int32_t two = 2, seven = 7;
  scalar.upload(&two, sizeof two);
  tcclRedOp_t op;
  ASSERT_EQ(tcclRedOpCreatePreMulSum(&op, scalar.data(), tcclInt32, tcclScalarDevice, comm_),
            tcclSuccess);
  EXPECT_EQ(allReduceInt32(op), expectedScaled(2));
  scalar.upload(&seven, sizeof seven);  // the next operation reads the new value
  EXPECT_EQ(allReduceInt32(op), expectedScaled(7));
  EXPECT_EQ(tcclRedOpDestroy(op, comm_), tcclSuccess);
}

TEST_P(RedOpTest, ManyLiveOpsAndSlotReuse) {
  std::vector<tcclRedOp_t> ops;
  for (int32_t s = 1; s <= 6; s++) {
    tcclRedOp_t op;
    ASSERT_EQ(tcclRedOpCreatePreMulSum(&op, &s, tcclInt32, tcclScalarHostImmediate, comm_),
              tcclSuccess);
    for (tcclRedOp_t other : ops) EXPECT_NE(op, other) << "two live ops share a value";
    ops.push_back(op);
  }
  // Used in another order than created: each keeps its own scalar.
  for (int i : {4, 0, 5, 2}) {
    EXPECT_EQ(allReduceInt32(ops[i]), expectedScaled(i + 1)) << "op " << i;
  }
  // Free two, make two new ones (which may reuse the slots): all live ops still right.
  ASSERT_EQ(tcclRedOpDestroy(ops[1], comm_), tcclSuccess);
  ASSERT_EQ(tcclRedOpDestroy(ops[3], comm_), tcclSuccess);
  for (int32_t s : {-10, 11}) {
    tcclRedOp_t op;
    ASSERT_EQ(tcclRedOpCreatePreMulSum(&op, &s, tcclInt32, tcclScalarHostImmediate, comm_),
              tcclSuccess);
    EXPECT_EQ(allReduceInt32(op), expectedScaled(s)) << "new op with scalar " << s;
    ops.push_back(op);
  }
  EXPECT_EQ(allReduceInt32(ops[2]), expectedScaled(3));
  for (size_t i = 0; i < ops.size(); i++) {
    if (i != 1 && i != 3) {
      EXPECT_EQ(tcclRedOpDestroy(ops[i], comm_), tcclSuccess);
    }
  }
}

TEST_P(RedOpTest, FloatAvgIsPreMulSumByInverseCount) {
  for (DType t : {DType::kFloat16, DType::kBfloat16, DType::kFloat32, DType::kFloat64}) {
    const size_t bytes = kCount * dtypeSize(t);
    std::vector<char> in(bytes);
    fillInput(in.data(), kCount, t, rank_, kSeed);
    CollBuffer send(bytes, GetParam()), avg(bytes, GetParam()), pre(bytes, GetParam());
    send.write(0, in.data(), bytes);
    const uint64_t inv = typeBits(1.0 / n_, t);
    tcclRedOp_t op;
    ASSERT_EQ(tcclRedOpCreatePreMulSum(&op, const_cast<uint64_t*>(&inv), toTccl(t),
                                       tcclScalarHostImmediate, comm_),
              tcclSuccess);
    EXPECT_EQ(tcclAllReduce(send.data(), avg.data(), kCount, toTccl(t), tcclAvg, comm_, nullptr),
              tcclSuccess);
    EXPECT_EQ(tcclAllReduce(send.data(), pre.data(), kCount, toTccl(t), op, comm_, nullptr),
              tcclSuccess);
    deviceSync();
    EXPECT_EQ(tcclRedOpDestroy(op, comm_), tcclSuccess);
    const uint8_t* av = avg.view() + CollBuffer::kGuard;
    const uint8_t* p = pre.view() + CollBuffer::kGuard;
    std::string why;
    EXPECT_TRUE(resultMatches(av, p, kCount, t, 0, true, &why))
        << dtypeName(t) << ": avg differs from premulsum by 1/" << n_ << ": " << why;
  }
}

INSTANTIATE_TEST_SUITE_P(Ring, RedOpTest, ::testing::ValuesIn(memKinds()),
                         [](const ::testing::TestParamInfo<MemKind>& info) {
                           return std::string(memKindName(info.param));
                         });

}  // namespace
}  // namespace ring
}  // namespace test
}  // namespace tccl
