/*
 * tests/errors/errors_fork_test.cc: misuses that need ranks in separate, fresh processes.
 *
 * What it is: the rows of docs/errors.md that one MPI job cannot produce, because tccl reads
 * its knobs once per process or because a rank must be missing:
 *  - TCCL_BUFFSIZE differs between ranks: every rank's tcclCommInitRank returns
 *    tcclInvalidUsage and says "TCCL_BUFFSIZE differs";
 *  - TCCL_BUFFSIZE too small or not a multiple of 128: tcclInvalidArgument;
 *  - a rank that never arrives: the others' tcclCommInitRank fails after
 *    TCCL_BOOTSTRAP_TIMEOUT instead of hanging;
 *  - nobody at the root address: tcclCommInitRank fails after TCCL_BOOTSTRAP_TIMEOUT.
 * Each rank is a forked child (tests/p2p/p2p_fork_util.h) that sets its environment, makes its
 * calls and reports the result code and tcclGetLastError through a pipe.
 *
 * Invariants: the test process itself makes no tccl call (a forked child must start from a
 * library that has read no knob yet); every wait has a deadline, and a child that misses it is
 * killed, so a hang is a failure, never a stuck test.
 *
 * NCCL counterpart: none (NCCL's own tests use MPI).
 * Added in: reliability (tests/errors), for stage 2 and every later stage.
 */
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "p2p_fork_util.h"
#include "tccl.h"

namespace tccl {
namespace test {
namespace errors {
namespace {

using p2p::Child;
using p2p::ChildEnd;
using p2p::Pipe;

/// What a child reports: the result of tcclCommInitRank and the last error text.
struct Report {
  int result = -1;
  double seconds = 0;
  char message[200] = {};
};

/// One rank in a fresh child: environment, unique id from TCCL_COMM_ID, init, report, destroy.
int rankMain(int rank, int nranks, const std::string& commId, const char* buffSize,
             const char* timeout, const Pipe* pipe) {
  ::setenv("TCCL_COMM_ID", commId.c_str(), 1);
  ::setenv("TCCL_BOOTSTRAP_TIMEOUT", timeout, 1);
  if (buffSize != nullptr) ::setenv("TCCL_BUFFSIZE", buffSize, 1);
  Report rep;
  tcclUniqueId id;
  const auto t0 = std::chrono::steady_clock::now();
  tcclResult_t r = tcclGetUniqueId(&id);
  tcclComm_t comm = nullptr;
  if (r == tcclSuccess) r = tcclCommInitRank(&comm, nranks, id, rank);
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rep.result = r;
  std::strncpy(rep.message, tcclGetLastError(nullptr), sizeof(rep.message) - 1);
  pipe->put(&rep, sizeof(rep));
  if (r == tcclSuccess) tcclCommDestroy(comm);
  return 0;
}

std::string loopbackId(int port) { return "127.0.0.1:" + std::to_string(port); }

TEST(ErrorsFork, BuffSizeDiffersBetweenRanks) {
  const int port = p2p::freeLoopbackPort();
  ASSERT_GT(port, 0);
  Pipe pipe0, pipe1;
  // Rank 1 asks for 1 MiB FIFOs; rank 0 keeps the default (4 MiB).
  Child r0([&] { return rankMain(0, 2, loopbackId(port), nullptr, "30", &pipe0); });
  Child r1([&] { return rankMain(1, 2, loopbackId(port), "1048576", "30", &pipe1); });
  ASSERT_TRUE(r0.started() && r1.started());
  for (const Pipe* p : {&pipe0, &pipe1}) {
    Report rep;
    ASSERT_TRUE(p->get(&rep, sizeof(rep), 60)) << "a rank did not return from init in 60 s";
    EXPECT_EQ(rep.result, tcclInvalidUsage)
        << tcclGetErrorString(tcclResult_t(rep.result)) << ": " << rep.message;
    EXPECT_NE(std::string(rep.message).find("TCCL_BUFFSIZE differs"), std::string::npos)
        << rep.message;
  }
  EXPECT_EQ(r0.wait(20).describe(), "exit 0");
  EXPECT_EQ(r1.wait(20).describe(), "exit 0");
}

TEST(ErrorsFork, BuffSizeInvalid) {
  const int port = p2p::freeLoopbackPort();
  ASSERT_GT(port, 0);
  Pipe pipe;
  // 1000 bytes: below 8 steps of one 16-byte pack each, and not a multiple of 128. One rank,
  // so nobody waits for it: a rank that fails here leaves its peers to their bootstrap timeout.
  Child r0([&] { return rankMain(0, 1, loopbackId(port), "1000", "30", &pipe); });
  ASSERT_TRUE(r0.started());
  Report rep;
  ASSERT_TRUE(pipe.get(&rep, sizeof(rep), 60)) << "init did not return within 60 s";
  EXPECT_EQ(rep.result, tcclInvalidArgument)
      << tcclGetErrorString(tcclResult_t(rep.result)) << ": " << rep.message;
  EXPECT_NE(std::string(rep.message).find("TCCL_BUFFSIZE=1000 is invalid"), std::string::npos)
      << rep.message;
  EXPECT_EQ(r0.wait(20).describe(), "exit 0");
}

TEST(ErrorsFork, RankThatNeverArrives) {
  const int port = p2p::freeLoopbackPort();
  ASSERT_GT(port, 0);
  Pipe pipe;
  // Rank 0 of 2 starts the root and waits for rank 1, which never comes.
  Child r0([&] { return rankMain(0, 2, loopbackId(port), nullptr, "1", &pipe); });
  ASSERT_TRUE(r0.started());
  Report rep;
  ASSERT_TRUE(pipe.get(&rep, sizeof(rep), 60)) << "init did not give up within 60 s";
  EXPECT_EQ(rep.result, tcclSystemError)
      << tcclGetErrorString(tcclResult_t(rep.result)) << ": " << rep.message;
  // The root names the missing rank; rank 0 passes its report on.
  EXPECT_NE(std::string(rep.message).find("rank 1 of 2 never joined"), std::string::npos)
      << rep.message;
  EXPECT_GE(rep.seconds, 0.9) << "gave up before TCCL_BOOTSTRAP_TIMEOUT (1 s): " << rep.message;
  EXPECT_LE(rep.seconds, 30.0) << rep.message;
  EXPECT_EQ(r0.wait(20).describe(), "exit 0");
}

TEST(ErrorsFork, NobodyAtTheRootAddress) {
  const int port = p2p::freeLoopbackPort();
  ASSERT_GT(port, 0);
  Pipe pipe;
  // Rank 1 of 2: rank 0 (which would start the root) never runs, so nothing listens there.
  Child r1([&] { return rankMain(1, 2, loopbackId(port), nullptr, "1", &pipe); });
  ASSERT_TRUE(r1.started());
  Report rep;
  ASSERT_TRUE(pipe.get(&rep, sizeof(rep), 60)) << "init did not give up within 60 s";
  EXPECT_EQ(rep.result, tcclSystemError)
      << tcclGetErrorString(tcclResult_t(rep.result)) << ": " << rep.message;
  EXPECT_NE(std::string(rep.message).find("could not reach"), std::string::npos) << rep.message;
  EXPECT_LE(rep.seconds, 30.0) << rep.message;
  EXPECT_EQ(r1.wait(20).describe(), "exit 0");
}

}  // namespace
}  // namespace errors
}  // namespace test
}  // namespace tccl
