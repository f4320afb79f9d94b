/*
 * common/harness/mpi_main.cc: the main() of every tccl test program (GoogleTest under MPI).
 *
 * What it is: MPI_Init, one GPU per rank (when the harness has CUDA and a GPU answers), then
 * RUN_ALL_TESTS with three listeners that make a multi-rank run read like a single program:
 *  - RankCombiner: at the end of every test, all ranks exchange "did this test fail here?"
 *    (MPI_Allgather), and every rank on which the test passed while another rank failed records
 *    a failure "failed on rank(s) ...". So every rank agrees on every verdict, rank 0's report
 *    names the failing ranks, and every rank's exit code is nonzero when any rank failed.
 *  - RankFailurePrinter (ranks other than 0, which lose GoogleTest's printer so the output is
 *    not repeated n times): prints the rank's own failures to stderr, prefixed "[rank r]".
 *  - Watchdog: with TCCL_TEST_TIMEOUT=<seconds> (set by tccl_add_mpi_test slightly below the
 *    CTest timeout), a test that runs longer makes the rank print "TIMEOUT: test <Suite.Name>
 *    on rank r exceeded N s" and exit with 124, so a hang names the test instead of being a
 *    bare CTest timeout. _exit rather than MPI_Abort: MPI is initialised without thread
 *    support, so the watchdog thread may not call MPI; mpirun tears down the other ranks.
 *
 * Invariants:
 *  - Every rank runs the same tests in the same order (same argv; a shuffle seed is taken from
 *    rank 0), because the combiner is a collective at the end of each test.
 *  - Listener order matters: GoogleTest calls OnTestEnd in reverse order of registration, so the
 *    combiner (registered last) runs first, while the watchdog is still armed (a rank stuck
 *    before the combiner's collective still times out) and before rank 0's printer prints the
 *    verdict (which then includes the other ranks' failures).
 *  - A test must not leave a rank blocked in a collective when it fails early on another rank:
 *    tests use allRanksOk() before communicating; the watchdog is the last resort.
 *
 * NCCL counterpart: nccl-tests src/common.cu (main, the MPI_Allreduce of errors) in spirit.
 * Added in: foundation (common/).
 */
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tccl_test/harness.h"

#ifdef TCCL_TEST_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#ifndef GTEST_FLAG_SET  // GoogleTest < 1.11
#define GTEST_FLAG_SET(name, value) (void)(::testing::GTEST_FLAG(name) = value)
#define GTEST_FLAG_GET(name) ::testing::GTEST_FLAG(name)
#endif

namespace tccl {
namespace test {
namespace {

std::string fullName(const ::testing::TestInfo& info) {
  return std::string(info.test_suite_name()) + "." + info.name();
}

// Set while RankCombiner reports another rank's failure, so that RankFailurePrinter does not
// echo that synthetic failure on every rank.
bool gReportingRemoteFailure = false;

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}

  // The test's name is remembered here: UnitTest::current_test_info() would take the lock that
  // GoogleTest holds while it delivers OnTestPartResult (a self-deadlock).
  void OnTestStart(const ::testing::TestInfo& info) override { test_ = fullName(info); }
  void OnTestEnd(const ::testing::TestInfo&) override { test_ = "(outside a test)"; }

  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed() || gReportingRemoteFailure) return;
    std::fprintf(stderr, "[rank %d] %s: %s:%d: Failure\n%s\n", rank_, test_.c_str(),
                 result.file_name() ? result.file_name() : "unknown file", result.line_number(),
                 result.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
  std::string test_ = "(outside a test)";
};

class RankCombiner : public ::testing::EmptyTestEventListener {
 public:
  RankCombiner(int rank, int size) : rank_(rank), size_(size) {}

  void OnTestEnd(const ::testing::TestInfo& info) override {
    int failedHere = info.result()->Failed() ? 1 : 0;
    std::vector<int> failed(size_);
    MPI_Allgather(&failedHere, 1, MPI_INT, failed.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::string others;
    for (int r = 0; r < size_; r++) {
      if (failed[r] && r != rank_) others += (others.empty() ? "" : ",") + std::to_string(r);
    }
    if (others.empty()) return;
    // Failures may be raised from OnTestEnd (GoogleTest's sample10 does the same): the test is
    // still current, so this lands in its result and the printers that run after us see it.
    gReportingRemoteFailure = true;
    // Reported at the test's definition, which says more than a line of this file.
    ADD_FAILURE_AT(info.file() ? info.file() : __FILE__, info.file() ? info.line() : __LINE__)
        << fullName(info) << " failed on rank(s) " << others
        << (rank_ == 0 ? " (their messages are on stderr, prefixed [rank r])" : "");
    gReportingRemoteFailure = false;
  }

 private:
  int rank_;
  int size_;
};

class Watchdog : public ::testing::EmptyTestEventListener {
 public:
  Watchdog(int rank, double seconds) : rank_(rank), seconds_(seconds) {
    thread_ = std::thread([this] { run(); });
  }
  ~Watchdog() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> lock(mu_);
    test_ = fullName(info);
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(seconds_));
    armed_ = true;
    cv_.notify_all();
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
    cv_.notify_all();
  }

 private:
  using Clock = std::chrono::steady_clock;

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !stop_ &&
          Clock::now() >= deadline_) {
        std::fprintf(stderr, "TIMEOUT: test %s on rank %d exceeded %g s\n", test_.c_str(), rank_,
                     seconds_);
        std::fflush(stderr);
        // Flush what the printer wrote so far, unless the hung thread holds stdout's lock.
        if (ftrylockfile(stdout) == 0) {
          fflush_unlocked(stdout);
          funlockfile(stdout);
        }
        _exit(124);
      }
    }
  }

  int rank_;
  double seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool stop_ = false;
  std::string test_;
  Clock::time_point deadline_;
  std::thread thread_;
};

double timeoutFromEnv() {
  const char* env = std::getenv("TCCL_TEST_TIMEOUT");
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  const double seconds = std::strtod(env, &end);
  if (end == env || *end != '\0' || seconds < 0) {
    std::fprintf(stderr, "tccl test harness: ignoring TCCL_TEST_TIMEOUT=%s (not seconds)\n", env);
    return 0;
  }
  return seconds;
}

// One GPU per rank, chosen by node-local rank, before any test creates a CUDA context.
void selectDevice(int local) {
#ifdef TCCL_TEST_HAVE_CUDA
  if (!haveGpu()) return;
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
    const cudaError_t err = cudaSetDevice(local % count);
    if (err != cudaSuccess) {
      std::fprintf(stderr, "tccl test harness: cudaSetDevice(%d): %s\n", local % count,
                   cudaGetErrorString(err));
    }
  }
#else
  (void)local;
#endif
}

}  // namespace
}  // namespace test
}  // namespace tccl

int main(int argc, char** argv) {
  using namespace tccl::test;
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = worldRank();
  const int size = worldSize();
  selectDevice(localRank());  // localRank() is collective on first use: every rank calls it

  // --gtest_shuffle: every rank must shuffle the same way (see the invariants above).
  int seed = GTEST_FLAG_GET(random_seed);
  if (GTEST_FLAG_GET(shuffle) && seed == 0 && rank == 0) {
    seed =
        static_cast<int>(std::chrono::steady_clock::now().time_since_epoch().count() % 99999) + 1;
  }
  MPI_Bcast(&seed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  GTEST_FLAG_SET(random_seed, seed);

  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    GTEST_FLAG_SET(output, "");  // one XML/JSON report (rank 0's), not n writers of one file
    listeners.Append(new RankFailurePrinter(rank));
  } else {
    std::printf("[tccl] %d rank(s); GPU: %s\n", size, haveGpu() ? "yes" : "no");
    std::fflush(stdout);
  }
  const double timeout = timeoutFromEnv();
  if (timeout > 0) listeners.Append(new Watchdog(rank, timeout));
  listeners.Append(new RankCombiner(rank, size));  // last: its OnTestEnd runs first

  const int local = RUN_ALL_TESTS();
  // Per-test verdicts already agree; this also catches failures outside tests (a global
  // environment, a suite's SetUpTestSuite) that only some ranks saw.
  const int status = allRanksOk(local == 0) ? 0 : 1;
  MPI_Finalize();
  return status;
}
