/*
 * tests/p2p/p2p_threads_test.cc: ranks as threads of one process (tcclCommInitAll), 1..5 ranks.
 *
 * What it is: the in-process tests, run without mpirun (plain GoogleTest main). tcclCommInitAll
 * creates n ranks of one communicator in this process; they are driven two ways:
 *  - one thread per rank, each making the calls its rank would make in an MPI program;
 *  - one thread for all ranks, with a single group spanning every communicator
 *    (tcclGroupStart; for each comm: send/recv or a pattern; tcclGroupEnd), as NCCL programs
 *    that drive several GPUs from one thread do.
 * Host buffers only (on a GPU machine rank i gets device i % count, tests/thread_devices.h; the
 * device paths are covered by the MPI tests).
 *
 * Invariants: the data of message src->dst is a pure function of (src, dst, seed), checked
 * byte for byte, with guard bytes after every receive buffer. TCCL_TEST_THREAD_RANKS (e.g.
 * "1,2") limits the rank counts.
 *
 * NCCL counterpart: the single-process, multi-GPU usage of ncclCommInitAll (NCCL docs,
 * "Example 1: Single Process, Single Thread, Multiple Devices"); Gloo's thread-rank tests.
 * Added in: stage 1.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tccl.h"
#include "../thread_devices.h"

namespace {

constexpr size_t kGuard = 64;
constexpr uint8_t kPoison = 0xd7;

uint8_t patternByte(int src, int dst, int seed, size_t i) {
  uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^
               static_cast<uint32_t>(src * 40503 + dst * 977 + seed * 131 + 1);
  x ^= x >> 15;
  return static_cast<uint8_t>(x * 0x2c1b3c6du >> 24);
}

/// A host buffer: `bytes` usable bytes, then kGuard poisoned bytes.
struct Msg {
  std::vector<uint8_t> mem;
  size_t bytes;
  explicit Msg(size_t n) : mem(n + kGuard, kPoison), bytes(n) {}
  void fill(int src, int dst, int seed, size_t offset = 0, size_t n = SIZE_MAX) {
    if (n == SIZE_MAX) n = bytes - offset;
    for (size_t i = 0; i < n; i++) mem[offset + i] = patternByte(src, dst, seed, i);
  }
  /// Checks [offset, offset+n) against the pattern of src->dst, and the guard.
  bool check(int src, int dst, int seed, std::string* why, size_t offset = 0,
             size_t n = SIZE_MAX) const {
    if (n == SIZE_MAX) n = bytes - offset;
    for (size_t i = 0; i < n; i++) {
      if (mem[offset + i] != patternByte(src, dst, seed, i)) {
        std::ostringstream os;
        os << "message " << src << "->" << dst << " (seed " << seed << ", " << n << " bytes): byte "
           << i << " is " << int(mem[offset + i]) << ", expected "
           << int(patternByte(src, dst, seed, i));
        *why = os.str();
        return false;
      }
    }
    for (size_t i = bytes; i < bytes + kGuard; i++) {
      if (mem[i] != kPoison) {
        *why = "guard byte " + std::to_string(i - bytes) + " after a " + std::to_string(bytes) +
               "-byte receive buffer was written";
        return false;
      }
    }
    return true;
  }
  void* data() { return mem.data(); }
};

#define TRY(call)                                                                \
  do {                                                                           \
    tcclResult_t r_ = (call);                                                    \
    if (r_ != tcclSuccess) {                                                     \
      *why = std::string(#call) + " returned " + tcclGetErrorString(r_) + ": " + \
             tcclGetLastError(nullptr);                                          \
      return false;                                                              \
    }                                                                            \
  } while (0)

size_t pairBytes(int src, int dst) {
  return (src * 5 + dst * 3) % 4 == 2 ? 0 : 1 + ((src * 7 + dst * 13) % 11) * 40009;
}

class ThreadRanksTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    n_ = GetParam();
    comms_.assign(n_, nullptr);
    const std::vector<int> devs = tccl_test::threadRankDevices(n_);
    ASSERT_EQ(tcclCommInitAll(comms_.data(), n_, tccl_test::devlistOrNull(devs)), tcclSuccess)
        << tcclGetLastError(nullptr);
    for (int i = 0; i < n_; i++) {
      int count = 0, rank = -1;
      ASSERT_EQ(tcclCommCount(comms_[i], &count), tcclSuccess);
      ASSERT_EQ(tcclCommUserRank(comms_[i], &rank), tcclSuccess);
      EXPECT_EQ(count, n_);
      EXPECT_EQ(rank, i);
    }
  }
  void TearDown() override {
    for (tcclComm_t c : comms_)
      if (c != nullptr) {
        EXPECT_EQ(tcclCommDestroy(c), tcclSuccess) << tcclGetLastError(c);
      }
  }

  /// What rank `r` does in the thread-per-rank test: all peers in one group, then a shift
  /// with tcclSendRecv, then alltoall and gather/scatter with every root.
  bool rankBody(int r, std::string* why) {
    tcclComm_t comm = comms_[r];
    const int n = n_;
    {
      std::vector<Msg> sends, recvs;
      for (int p = 0; p < n; p++) {
        sends.emplace_back(pairBytes(r, p));
        sends.back().fill(r, p, 1);
        recvs.emplace_back(pairBytes(p, r));
      }
      TRY(tcclGroupStart());
      for (int i = 0; i < n; i++) {
        int p = (r + i) % n;  // each rank starts with a different peer
        TRY(tcclRecv(recvs[p].data(), recvs[p].bytes, tcclUint8, p, comm, nullptr));
        TRY(tcclSend(sends[p].data(), sends[p].bytes, tcclUint8, p, comm, nullptr));
      }
      TRY(tcclGroupEnd());
      for (int p = 0; p < n; p++)
        if (!recvs[p].check(p, r, 1, why)) return false;
    }
    {
      const size_t bytes = (size_t{1} << 20) + 3;
      Msg s(bytes), d(bytes);
      s.fill(r, -1, 2);
      TRY(tcclSendRecv(s.data(), d.data(), bytes, tcclInt8, (r + 1) % n, (r + n - 1) % n, comm,
                       nullptr));
      if (!d.check((r + n - 1) % n, -1, 2, why)) return false;
    }
    {
      const size_t blk = 1000 * sizeof(int32_t);
      Msg s(blk * n), d(blk * n);
      for (int p = 0; p < n; p++) s.fill(r, p, 3, p * blk, blk);
      TRY(tcclAlltoAll(s.data(), d.data(), 1000, tcclInt32, comm, nullptr));
      for (int p = 0; p < n; p++)
        if (!d.check(p, r, 3, why, p * blk, blk)) return false;
    }
    for (int root = 0; root < n; root++) {
      const size_t blk = 777 * sizeof(uint16_t);
      Msg s(blk), d(blk * n);
      s.fill(r, root, 4);
      TRY(tcclGather(s.data(), d.data(), 777, tcclFloat16, root, comm, nullptr));
      if (r == root)
        for (int p = 0; p < n; p++)
          if (!d.check(p, root, 4, why, p * blk, blk)) return false;
      Msg s2(blk * n), d2(blk);
      if (r == root)
        for (int p = 0; p < n; p++) s2.fill(root, p, 5, p * blk, blk);
      TRY(tcclScatter(s2.data(), d2.data(), 777, tcclBfloat16, root, comm, nullptr));
      if (!d2.check(root, r, 5, why)) return false;
    }
    return true;
  }

  int n_ = 0;
  std::vector<tcclComm_t> comms_;
};

TEST_P(ThreadRanksTest, ThreadPerRank) {
  std::vector<std::string> whys(n_);
  std::vector<int> oks(n_, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n_; r++)
    threads.emplace_back([this, r, &whys, &oks] { oks[r] = rankBody(r, &whys[r]) ? 1 : 0; });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n_; r++) EXPECT_TRUE(oks[r]) << "rank " << r << ": " << whys[r];
}

TEST_P(ThreadRanksTest, OneThreadOneGroupSendRecv) {
  // Every rank to every rank, all in one group over n communicators, from this thread.
  std::vector<std::vector<Msg>> sends(n_), recvs(n_);
  for (int r = 0; r < n_; r++)
    for (int p = 0; p < n_; p++) {
      sends[r].emplace_back(pairBytes(r, p) * 3);
      sends[r].back().fill(r, p, 6);
      recvs[r].emplace_back(pairBytes(p, r) * 3);
    }
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  for (int r = 0; r < n_; r++)
    for (int p = 0; p < n_; p++) {
      EXPECT_EQ(tcclSend(sends[r][p].data(), sends[r][p].bytes, tcclUint8, p, comms_[r], nullptr),
                tcclSuccess)
          << tcclGetLastError(comms_[r]);
      EXPECT_EQ(tcclRecv(recvs[r][p].data(), recvs[r][p].bytes, tcclUint8, p, comms_[r], nullptr),
                tcclSuccess)
          << tcclGetLastError(comms_[r]);
    }
  ASSERT_EQ(tcclGroupEnd(), tcclSuccess) << tcclGetLastError(nullptr);
  std::string why;
  for (int r = 0; r < n_; r++)
    for (int p = 0; p < n_; p++) EXPECT_TRUE(recvs[r][p].check(p, r, 6, &why)) << why;
}

TEST_P(ThreadRanksTest, OneThreadOneGroupPatterns) {
  // The pattern calls are groups themselves; inside the outer group they nest and run together.
  const size_t blk = 4099;
  std::vector<Msg> a2aIn, a2aOut, nbIn, nbOut;
  for (int r = 0; r < n_; r++) {
    a2aIn.emplace_back(blk * n_);
    for (int p = 0; p < n_; p++) a2aIn[r].fill(r, p, 7, p * blk, blk);
    a2aOut.emplace_back(blk * n_);
    nbIn.emplace_back(2 * blk);
    nbIn[r].fill(r, -2, 8, 0, blk);    // to the left
    nbIn[r].fill(r, -3, 8, blk, blk);  // to the right
    nbOut.emplace_back(2 * blk);
  }
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  for (int r = 0; r < n_; r++) {
    EXPECT_EQ(tcclAlltoAll(a2aIn[r].data(), a2aOut[r].data(), blk, tcclUint8, comms_[r], nullptr),
              tcclSuccess)
        << tcclGetLastError(comms_[r]);
    EXPECT_EQ(
        tcclNeighborExchange(nbIn[r].data(), nbOut[r].data(), blk, tcclInt8, comms_[r], nullptr),
        tcclSuccess)
        << tcclGetLastError(comms_[r]);
  }
  ASSERT_EQ(tcclGroupEnd(), tcclSuccess) << tcclGetLastError(nullptr);
  std::string why;
  for (int r = 0; r < n_; r++) {
    const int left = (r + n_ - 1) % n_, right = (r + 1) % n_;
    for (int p = 0; p < n_; p++) EXPECT_TRUE(a2aOut[r].check(p, r, 7, &why, p * blk, blk)) << why;
    // [0,blk) from the left neighbour's right half; [blk,2blk) from the right's left half.
    EXPECT_TRUE(nbOut[r].check(left, -3, 8, &why, 0, blk)) << "rank " << r << ": " << why;
    EXPECT_TRUE(nbOut[r].check(right, -2, 8, &why, blk, blk)) << "rank " << r << ": " << why;
  }
}

std::vector<int> rankCounts() {
  std::vector<int> out;
  const char* env = std::getenv("TCCL_TEST_THREAD_RANKS");
  std::stringstream ss(env != nullptr && *env != '\0' ? env : "1,2,3,4,5");
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(std::atoi(item.c_str()));
  return out;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ThreadRanksTest, ::testing::ValuesIn(rankCounts()),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "n" + std::to_string(info.param);
                         });

}  // namespace
