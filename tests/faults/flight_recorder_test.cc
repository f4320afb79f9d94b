/*
 * tests/faults/flight_recorder_test.cc: the flight recorder and the watchdog (stage 7).
 *
 * What it is: MPI tests of
 *  - the record: after all-reduce, broadcast, all-gather, reduce-scatter, reduce and a ring of
 *    send/recv, the dump (tcclCommDumpFlightRecorder) holds each operation once, completed,
 *    with PyTorch's names ("nccl:all_reduce", "nccl:send 0->1"), collective_seq_id 1..5 and
 *    p2p_seq_id 1..2 in issue order, sizes and dtypes as called;
 *  - the dump API's errors: no communicator, no path and no TCCL_FR_DUMP;
 *  - the dump on SIGUSR1 (SignalDumps, run by CTest with TCCL_FR_DUMP_ON_SIGNAL=1): the file
 *    appears within the watchdog's tick, with no call from the program;
 *  - the watchdog (Watchdog.*, run by CTest with TCCL_TIMEOUT=3 and TCCL_FR_DUMP set): the
 *    ranks agree on collective 1, then rank 1 never calls collective 2, an all-reduce (a rank
 *    stuck elsewhere, or dead). Without the watchdog the others hang for ever; with it, their
 *    calls return tcclRemoteError within the timeout plus a margin, tcclGetLastError(comm)
 *    names the operation, and each leaves a dump; rank 1 dumps through the API once they are
 *    done. The next CTest test hands the dumps to tools/frtrace (faults_tests.cmake: it must
 *    say that rank 1 never joined collective 2). Two easier-looking hangs are not hangs: a
 *    rank that broadcasts where the others all-reduce, or one that receives from its ring
 *    neighbour, can finish -- with the neighbour's all-reduce bytes, over the same connection
 *    -- and only the check mode catches those.
 * Host buffers, and the same hang once more with device buffers where a GPU is
 * (Watchdog.StopsAWaitingKernel: the kernel waiting for rank 1 leaves its spin loop once the
 * watchdog raises the abort flag, and the stream synchronizes).
 *
 * Invariants: every multi-rank test runs under CTest's timeout and the harness's watchdog;
 * dumps go to files named after the rank, in a directory the test empties first.
 *
 * NCCL counterpart: none (NCCL has no flight recorder); PyTorch:
 * test/distributed/test_c10d_nccl.py's flight recorder tests, in spirit.
 * Added in: stage 7.
 */
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../ring/ring_case.h"  // initWorldComm
#include "tccl.h"
#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace {

using ring::initWorldComm;

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int countOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) n++;
  return n;
}

TEST(FlightRecorder, RecordsEveryOperationInOrder) {
  const int r = worldRank(), n = worldSize();
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorldComm(&comm), tcclSuccess);
  const size_t count = 1000;
  std::vector<float> a(count * size_t(n), 1.0f), b(count * size_t(n), 0.0f);
  ASSERT_EQ(tcclAllReduce(a.data(), b.data(), count, tcclFloat32, tcclSum, comm, nullptr),
            tcclSuccess);
  ASSERT_EQ(tcclBroadcast(a.data(), a.data(), 10, tcclInt32, 0, comm, nullptr), tcclSuccess);
  ASSERT_EQ(tcclAllGather(a.data(), b.data(), 7, tcclFloat32, comm, nullptr), tcclSuccess);
  ASSERT_EQ(tcclReduceScatter(a.data(), b.data(), 5, tcclFloat32, tcclMax, comm, nullptr),
            tcclSuccess);
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  ASSERT_EQ(tcclSend(a.data(), 3, tcclFloat64, (r + 1) % n, comm, nullptr), tcclSuccess);
  ASSERT_EQ(tcclRecv(b.data(), 3, tcclFloat64, (r + n - 1) % n, comm, nullptr), tcclSuccess);
  ASSERT_EQ(tcclGroupEnd(), tcclSuccess);
  ASSERT_EQ(tcclReduce(a.data(), b.data(), 4, tcclInt64, tcclMin, n - 1, comm, nullptr),
            tcclSuccess);

  const char* tmp = getenv("TMPDIR");
  const std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/tccl_fr_test." +
                           std::to_string(getpid()) + "." + std::to_string(r);
  ASSERT_EQ(tcclCommDumpFlightRecorder(comm, path.c_str()), tcclSuccess);
  const std::string dump = readFile(path);
  unlink(path.c_str());
  ASSERT_FALSE(dump.empty()) << path;
  // PyTorch's layout and names.
  EXPECT_EQ(countOf(dump, "\"version\": \"2.10\""), 1);
  EXPECT_EQ(countOf(dump, "\"pg_config\""), 1);
  EXPECT_EQ(countOf(dump, "\"profiling_name\": \"nccl:all_reduce\""), 1);
  EXPECT_EQ(countOf(dump, "\"profiling_name\": \"nccl:broadcast\""), 1);
  EXPECT_EQ(countOf(dump, "\"profiling_name\": \"nccl:all_gather\""), 1);
  EXPECT_EQ(countOf(dump, "\"profiling_name\": \"nccl:reduce_scatter\""), 1);
  EXPECT_EQ(countOf(dump, "\"profiling_name\": \"nccl:reduce\""), 1);
  const std::string send = "\"nccl:send " + std::to_string(r) + "->" + std::to_string((r + 1) % n);
  const std::string recv =
      "\"nccl:recv " + std::to_string(r) + "<-" + std::to_string((r + n - 1) % n);
  EXPECT_EQ(countOf(dump, send + "\""), 1) << dump;
  EXPECT_EQ(countOf(dump, recv + "\""), 1) << dump;
  // Seven operations, every one completed, numbered in issue order.
  EXPECT_EQ(countOf(dump, "\"record_id\""), 7);
  EXPECT_EQ(countOf(dump, "\"state\": \"completed\""), 7) << dump;
  for (int seq = 1; seq <= 5; seq++) {
    EXPECT_GE(countOf(dump, "\"collective_seq_id\": " + std::to_string(seq) + ","), 1) << seq;
  }
  EXPECT_EQ(countOf(dump, "\"p2p_seq_id\": 1,"), 1);
  EXPECT_EQ(countOf(dump, "\"p2p_seq_id\": 2,"), 1);
  // Sizes and types as called: all-gather 7 in, 7n out; reduce-scatter 5n in, 5 out.
  EXPECT_EQ(countOf(dump, "\"input_sizes\": [[7]], \"input_dtypes\": [\"Float\"], "
                          "\"output_sizes\": [[" + std::to_string(7 * n) + "]]"), 1) << dump;
  EXPECT_EQ(countOf(dump, "\"input_sizes\": [[" + std::to_string(5 * n) +
                              "]], \"input_dtypes\": [\"Float\"], \"output_sizes\": [[5]]"), 1);
  EXPECT_EQ(countOf(dump, "\"input_dtypes\": [\"Long\"]"), 1);  // the int64 reduce
  EXPECT_EQ(countOf(dump, "\"redop\": \"min\""), 1);
  // Broadcast from 0, reduce to n-1 (one rank: both 0).
  EXPECT_EQ(countOf(dump, "\"root\": " + std::to_string(n - 1) + ","), n == 1 ? 2 : 1);
  ASSERT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

// Device buffers (where there is a GPU): an operation whose call launched kernels is
// "scheduled" and becomes "completed" once the communicator's launch event has fired, which the
// watchdog notices (100 ms ticks). Out of place, so that even one rank launches (a copy): in
// place, one rank has nothing to do, and its operation is completed when the call returns.
TEST(FlightRecorder, DeviceOperationsCompleteWhenTheirEventFires) {
  if (!haveGpu()) GTEST_SKIP() << "no GPU";
  const int r = worldRank();
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorldComm(&comm), tcclSuccess);
  Buffer in(4000 * sizeof(float), MemKind::kDevice), out(4000 * sizeof(float), MemKind::kDevice);
  in.poison();
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(tcclAllReduce(in.data(), out.data(), 4000, tcclFloat32, tcclMax, comm, nullptr),
              tcclSuccess);
  }
  deviceSync();
  const char* tmp = getenv("TMPDIR");
  const std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/tccl_fr_dev." +
                           std::to_string(getpid()) + "." + std::to_string(r);
  std::string dump;
  for (int tries = 0; tries < 50; tries++) {  // up to 5 s for the watchdog's tick
    ASSERT_EQ(tcclCommDumpFlightRecorder(comm, path.c_str()), tcclSuccess);
    dump = readFile(path);
    if (countOf(dump, "\"state\": \"completed\"") == 3) break;
    usleep(100 * 1000);
  }
  unlink(path.c_str());
  EXPECT_EQ(countOf(dump, "\"state\": \"completed\""), 3) << dump;
  EXPECT_EQ(countOf(dump, "\"on_device\": true"), 3) << dump;
  ASSERT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

// Run by CTest with TCCL_FR_DUMP_ON_SIGNAL=1 and TCCL_FR_DUMP set (faults_tests.cmake): a
// SIGUSR1 makes the watchdog dump at its next tick (100 ms), with no call from the program.
TEST(FlightRecorder, SignalDumps) {
  const char* onSignal = getenv("TCCL_FR_DUMP_ON_SIGNAL");
  const char* prefix = getenv("TCCL_FR_DUMP");
  if (onSignal == nullptr || std::string(onSignal) != "1" || prefix == nullptr) {
    GTEST_SKIP() << "needs TCCL_FR_DUMP_ON_SIGNAL=1 and TCCL_FR_DUMP";
  }
  const int r = worldRank();
  const std::string path = std::string(prefix) + std::to_string(r);
  unlink(path.c_str());
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorldComm(&comm), tcclSuccess);
  std::vector<int32_t> a(10, 1), b(10, 0);
  ASSERT_EQ(tcclAllReduce(a.data(), b.data(), 10, tcclInt32, tcclSum, comm, nullptr),
            tcclSuccess);
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  std::string dump;
  for (int tries = 0; tries < 50 && dump.empty(); tries++) {  // up to 5 s
    usleep(100 * 1000);
    dump = readFile(path);
  }
  EXPECT_EQ(countOf(dump, "\"profiling_name\": \"nccl:all_reduce\""), 1) << path;
  EXPECT_EQ(countOf(dump, "\"state\": \"completed\""), 1) << dump;
  unlink(path.c_str());
  ASSERT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

TEST(FlightRecorder, DumpErrorsAreClear) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorldComm(&comm), tcclSuccess);
  EXPECT_NE(tcclCommDumpFlightRecorder(nullptr, "/tmp/x"), tcclSuccess);
  if (getenv("TCCL_FR_DUMP") == nullptr) {
    EXPECT_EQ(tcclCommDumpFlightRecorder(comm, nullptr), tcclInvalidArgument);
  }
  ASSERT_EQ(tcclCommDestroy(comm), tcclSuccess);
}

// Run by CTest with TCCL_TIMEOUT=3 and TCCL_FR_DUMP=<dir>/fr_ (faults_tests.cmake).
TEST(Watchdog, MismatchedCollectivesEndInAnErrorNamingTheOperation) {
  const char* dumpPrefix = getenv("TCCL_FR_DUMP");
  const char* timeout = getenv("TCCL_TIMEOUT");
  if (dumpPrefix == nullptr || timeout == nullptr) GTEST_SKIP() << "needs TCCL_TIMEOUT, TCCL_FR_DUMP";
  const int r = worldRank(), n = worldSize();
  ASSERT_GE(n, 2);
  // This rank's dump from an earlier run would be taken for this one's.
  unlink((std::string(dumpPrefix) + std::to_string(r)).c_str());
  barrier();
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorldComm(&comm), tcclSuccess);
  std::vector<float> a(1000, 1.0f), b(1000, 0.0f);
  ASSERT_EQ(tcclAllReduce(a.data(), b.data(), 1000, tcclFloat32, tcclSum, comm, nullptr),
            tcclSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  if (r == 1) {
    // Never joins collective 2: waits until the others gave up, then dumps and leaves.
    barrier();
    EXPECT_EQ(tcclCommDumpFlightRecorder(comm, nullptr), tcclSuccess);
    const std::string dump = readFile(std::string(dumpPrefix) + std::to_string(r));
    EXPECT_EQ(countOf(dump, "\"state\": \"completed\""), 1) << dump;
    EXPECT_EQ(tcclCommAbort(comm), tcclSuccess);
    return;
  }
  // Collective 2: everyone all-reduces but rank 1. Nobody can finish.
  tcclResult_t res = tcclAllReduce(a.data(), b.data(), 1000, tcclFloat32, tcclSum, comm, nullptr);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(res, tcclRemoteError);
  EXPECT_LT(secs, atof(timeout) + 5.0) << "the watchdog fired late";
  const std::string why = tcclGetLastError(comm) ? tcclGetLastError(comm) : "";
  EXPECT_NE(why.find("watchdog"), std::string::npos) << why;
  EXPECT_NE(why.find("nccl:all_reduce of 1000 x float32"), std::string::npos) << why;
  EXPECT_NE(why.find("collective 2"), std::string::npos) << why;
  // The dump is there, and names the stuck operation as started.
  const std::string dump = readFile(std::string(dumpPrefix) + std::to_string(r));
  EXPECT_EQ(countOf(dump, "\"state\": \"started\""), 1) << dump;
  barrier();  // rank 1 may dump now
  EXPECT_EQ(tcclCommAbort(comm), tcclSuccess);
}

/// The same hang with device buffers (GPU only): the stuck operation is a kernel waiting for
/// rank 1's data. The call itself returned at once (launches are asynchronous), so the
/// watchdog's verdict arrives through tcclCommGetAsyncError; the kernel, which reads the abort
/// flag in every spin loop, must then have left: the stream synchronizes.
TEST(Watchdog, StopsAWaitingKernel) {
  const char* dumpPrefix = getenv("TCCL_FR_DUMP");
  const char* timeout = getenv("TCCL_TIMEOUT");
  if (dumpPrefix == nullptr || timeout == nullptr) GTEST_SKIP() << "needs TCCL_TIMEOUT, TCCL_FR_DUMP";
  if (!haveGpu()) GTEST_SKIP() << "no GPU";
  const int r = worldRank();
  barrier();
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initWorldComm(&comm), tcclSuccess);
  Buffer buf(1000 * sizeof(float), MemKind::kDevice);
  ASSERT_EQ(tcclAllReduce(buf.data(), buf.data(), 1000, tcclFloat32, tcclSum, comm, nullptr),
            tcclSuccess);
  deviceSync();
  if (r == 1) {
    barrier();  // never joins collective 2; dumps once the others gave up (for tools/frtrace)
    EXPECT_EQ(tcclCommDumpFlightRecorder(comm, nullptr), tcclSuccess);
    EXPECT_EQ(tcclCommAbort(comm), tcclSuccess);
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  // (EXPECT, not ASSERT, from here: rank 1 waits at the barrier below whatever happens.)
  EXPECT_EQ(tcclAllReduce(buf.data(), buf.data(), 1000, tcclFloat32, tcclSum, comm, nullptr),
            tcclSuccess);  // launched
  tcclResult_t state = tcclSuccess;
  while (state == tcclSuccess &&
         std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(atof(timeout) + 10)) {
    if (tcclCommGetAsyncError(comm, &state) != tcclSuccess) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(state, tcclRemoteError);
  deviceSync();  // the kernel left its spin loop
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, atof(timeout) + 5.0) << "the watchdog fired late, or the kernel kept waiting";
  const std::string why = tcclGetLastError(comm) ? tcclGetLastError(comm) : "";
  EXPECT_NE(why.find("collective 2"), std::string::npos) << why;
  barrier();
  EXPECT_EQ(tcclCommAbort(comm), tcclSuccess);
}

}  // namespace
}  // namespace test
}  // namespace tccl
