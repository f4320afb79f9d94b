/*
 * tests/ring/ring_threads_test.cc: ring collectives over the ranks of one process
 * (tcclCommInitAll), 1..5 ranks, run without mpirun (plain GoogleTest main).
 *
 * What it is: the single-process usage of chapter 2, as NCCL programs that drive several GPUs
 * from one thread do it: tcclCommInitAll makes n communicators, and
 *  - one thread issues an AllReduce on every communicator inside one group (the group spans
 *    all n communicators, so all n ranks' ring work starts before any is waited for), for
 *    several types, ops and counts;
 *  - one thread issues all five collectives on every communicator in one group;
 *  - one thread per rank runs a sequence of collectives on its own communicator.
 * Host buffers only (on a GPU machine the ranks get devices 0..n-1 and host buffers are still
 * valid; the device paths are covered by the MPI tests).
 *
 * Invariants: inputs are a closed form of (rank, index): small integers whose sums, maxima,
 * minima and truncated averages are exact in every type used, so results are compared exactly.
 * Every receive buffer has poisoned guard elements after it. TCCL_TEST_THREAD_RANKS (e.g.
 * "1,2") limits the rank counts, for machines with fewer than 5 GPUs.
 *
 * NCCL counterpart: NCCL docs, "Example 1: Single Process, Single Thread, Multiple Devices".
 * Added in: stage 2.
 */
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tccl.h"
#include "../thread_devices.h"

namespace {

constexpr size_t kGuard = 16;  // elements after every receive buffer
constexpr int32_t kPoison = -77777;

/// Rank r's input element i: in -3..3, different per rank and index.
int32_t inputOf(int r, size_t i) { return int32_t((i * 131 + size_t(r) * 17 + i / 7) % 7) - 3; }

enum class Op { kSum, kMax, kMin, kAvg };
tcclRedOp_t toTccl(Op op) {
  switch (op) {
    case Op::kSum:
      return tcclSum;
    case Op::kMax:
      return tcclMax;
    case Op::kMin:
      return tcclMin;
    case Op::kAvg:
      return tcclAvg;
  }
  return tcclSum;
}

int64_t reduceOf(Op op, int n, size_t i) {
  int64_t acc = inputOf(0, i);
  for (int r = 1; r < n; r++) {
    const int64_t x = inputOf(r, i);
    if (op == Op::kSum || op == Op::kAvg) acc += x;
    if (op == Op::kMax) acc = std::max(acc, x);
    if (op == Op::kMin) acc = std::min(acc, x);
  }
  return op == Op::kAvg ? acc / n : acc;  // integer avg: C truncation, as tcclAvg
}

/// Input / output vectors of int32 (the op tests) and float (the mixed-collective test), with
/// guard elements after the count.
template <typename T>
std::vector<T> inputVec(int r, size_t count) {
  std::vector<T> v(count + kGuard, T(kPoison));
  for (size_t i = 0; i < count; i++) v[i] = T(inputOf(r, i));
  return v;
}
template <typename T>
std::vector<T> poisoned(size_t count) {
  return std::vector<T>(count + kGuard, T(kPoison));
}

/// Checks out[0..count) == expected(i) and the guards; describes the first mismatch.
template <typename T, typename Fn>
bool checkVec(const std::vector<T>& out, size_t count, Fn expected, std::string* why) {
  for (size_t i = 0; i < count + kGuard; i++) {
    const T want = i < count ? T(expected(i)) : T(kPoison);
    if (out[i] != want) {
      std::ostringstream os;
      os << (i < count ? "element " : "guard element ") << i << " is " << out[i] << ", expected "
         << want << " (count " << count << ")";
      *why = os.str();
      return false;
    }
  }
  return true;
}

class ThreadRanksTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    n_ = GetParam();
    comms_.assign(n_, nullptr);
    const std::vector<int> devs = tccl_test::threadRankDevices(n_);
    ASSERT_EQ(tcclCommInitAll(comms_.data(), n_, tccl_test::devlistOrNull(devs)), tcclSuccess)
        << tcclGetLastError(nullptr);
  }
  void TearDown() override {
    for (tcclComm_t c : comms_) {
      if (c != nullptr) {
        EXPECT_EQ(tcclCommDestroy(c), tcclSuccess) << tcclGetLastError(c);
      }
    }
  }
  int n_ = 0;
  std::vector<tcclComm_t> comms_;
};

TEST_P(ThreadRanksTest, OneThreadOneGroupAllReduce) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{1021}, size_t{262147}}) {
    for (Op op : {Op::kSum, Op::kMax, Op::kMin, Op::kAvg}) {
      std::vector<std::vector<int32_t>> in, out;
      for (int r = 0; r < n_; r++) {
        in.push_back(inputVec<int32_t>(r, count));
        out.push_back(poisoned<int32_t>(count));
      }
      ASSERT_EQ(tcclGroupStart(), tcclSuccess);
      for (int r = 0; r < n_; r++) {
        EXPECT_EQ(tcclAllReduce(in[r].data(), out[r].data(), count, tcclInt32, toTccl(op),
                                comms_[r], nullptr),
                  tcclSuccess)
            << tcclGetLastError(comms_[r]);
      }
      ASSERT_EQ(tcclGroupEnd(), tcclSuccess) << tcclGetLastError(nullptr);
      std::string why;
      for (int r = 0; r < n_; r++) {
        EXPECT_TRUE(checkVec(
            out[r], count, [&](size_t i) { return reduceOf(op, n_, i); }, &why))
            << "rank " << r << " op " << int(op) << ": " << why;
      }
    }
  }
}

TEST_P(ThreadRanksTest, OneThreadOneGroupAllCollectives) {
  // AllReduce (in place), AllGather, ReduceScatter, Broadcast and Reduce (root n-1) on float,
  // all n ranks' calls in one group.
  const size_t count = 5003;
  const int root = n_ - 1;
  std::vector<std::vector<float>> ar, agIn, agOut, rsIn, rsOut, bc, rdIn, rdOut;
  for (int r = 0; r < n_; r++) {
    ar.push_back(inputVec<float>(r, count));
    agIn.push_back(inputVec<float>(r, count));
    agOut.push_back(poisoned<float>(count * n_));
    rsIn.push_back(inputVec<float>(r, count * n_));
    rsOut.push_back(poisoned<float>(count));
    bc.push_back(r == root ? inputVec<float>(r, count) : poisoned<float>(count));
    rdIn.push_back(inputVec<float>(r, count));
    rdOut.push_back(poisoned<float>(count));
  }
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  for (int r = 0; r < n_; r++) {
    tcclComm_t c = comms_[r];
    EXPECT_EQ(tcclAllReduce(ar[r].data(), ar[r].data(), count, tcclFloat32, tcclSum, c, nullptr),
              tcclSuccess);
    EXPECT_EQ(tcclAllGather(agIn[r].data(), agOut[r].data(), count, tcclFloat32, c, nullptr),
              tcclSuccess);
    EXPECT_EQ(
        tcclReduceScatter(rsIn[r].data(), rsOut[r].data(), count, tcclFloat32, tcclMax, c, nullptr),
        tcclSuccess);
    EXPECT_EQ(tcclBroadcast(bc[r].data(), bc[r].data(), count, tcclFloat32, root, c, nullptr),
              tcclSuccess);
    EXPECT_EQ(
        tcclReduce(rdIn[r].data(), rdOut[r].data(), count, tcclFloat32, tcclMin, root, c, nullptr),
        tcclSuccess);
  }
  ASSERT_EQ(tcclGroupEnd(), tcclSuccess) << tcclGetLastError(nullptr);
  std::string why;
  for (int r = 0; r < n_; r++) {
    EXPECT_TRUE(checkVec(
        ar[r], count, [&](size_t i) { return reduceOf(Op::kSum, n_, i); }, &why))
        << "allreduce rank " << r << ": " << why;
    EXPECT_TRUE(checkVec(
        agOut[r], count * n_, [&](size_t i) { return inputOf(int(i / count), i % count); }, &why))
        << "allgather rank " << r << ": " << why;
    EXPECT_TRUE(checkVec(
        rsOut[r], count, [&](size_t i) { return reduceOf(Op::kMax, n_, r * count + i); }, &why))
        << "reducescatter rank " << r << ": " << why;
    EXPECT_TRUE(checkVec(
        bc[r], count, [&](size_t i) { return inputOf(root, i); }, &why))
        << "broadcast rank " << r << ": " << why;
    if (r == root) {
      EXPECT_TRUE(checkVec(
          rdOut[r], count, [&](size_t i) { return reduceOf(Op::kMin, n_, i); }, &why))
          << "reduce root: " << why;
    } else {
      EXPECT_TRUE(std::all_of(rdOut[r].begin(), rdOut[r].end(),
                              [](float v) { return v == float(kPoison); }))
          << "reduce wrote the recvbuff of non-root rank " << r;
    }
  }
}

TEST_P(ThreadRanksTest, ThreadPerRank) {
  std::vector<std::string> whys(n_);
  std::vector<int> oks(n_, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n_; r++) {
    threads.emplace_back([this, r, &whys, &oks] {
      tcclComm_t c = comms_[r];
      for (int iter = 0; iter < 5; iter++) {
        const size_t count = 1000 + size_t(iter) * 33331;
        auto in = inputVec<int32_t>(r, count);
        auto out = poisoned<int32_t>(count);
        const Op op = Op(iter % 4);
        tcclResult_t res =
            tcclAllReduce(in.data(), out.data(), count, tcclInt32, toTccl(op), c, nullptr);
        if (res != tcclSuccess) {
          whys[r] = std::string("tcclAllReduce: ") + tcclGetErrorString(res);
          return;
        }
        if (!checkVec(
                out, count, [&](size_t i) { return reduceOf(op, n_, i); }, &whys[r]))
          return;
        auto bc = r == iter % n_ ? inputVec<int32_t>(r, count) : poisoned<int32_t>(count);
        res = tcclBroadcast(bc.data(), bc.data(), count, tcclInt32, iter % n_, c, nullptr);
        if (res != tcclSuccess) {
          whys[r] = std::string("tcclBroadcast: ") + tcclGetErrorString(res);
          return;
        }
        if (!checkVec(
                bc, count, [&](size_t i) { return inputOf(iter % n_, i); }, &whys[r])) {
          return;
        }
      }
      oks[r] = 1;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n_; r++) EXPECT_TRUE(oks[r]) << "rank " << r << ": " << whys[r];
}

std::vector<int> rankCounts() {
  std::vector<int> out;
  const char* env = std::getenv("TCCL_TEST_THREAD_RANKS");
  std::stringstream ss(env != nullptr && *env != '\0' ? env : "1,2,3,4,5");
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(std::atoi(item.c_str()));
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadRanksTest, ::testing::ValuesIn(rankCounts()),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "n" + std::to_string(info.param);
                         });

}  // namespace
