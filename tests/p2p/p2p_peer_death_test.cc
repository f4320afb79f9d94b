/*
 * tests/p2p/p2p_peer_death_test.cc: a peer killed with SIGKILL in the middle of a transfer.
 *
 * What it is: two ranks as two forked processes (no mpirun) forming a communicator through
 * TCCL_COMM_ID=127.0.0.1:<free port>. They stream 64 MiB messages; once the first message has
 * arrived, the test process kills the "victim" rank with SIGKILL. The surviving rank's call
 * (tcclRecv, tcclSend, or tcclGroupEnd of a send+recv group) must return tcclRemoteError or
 * tcclSystemError within 10 s, and tcclCommAbort must then return too.
 *
 * Invariants: the test process makes no tccl call but tcclGetErrorString (both ranks are fresh
 * children); every wait has a deadline, so a survivor that hangs is reported and killed, never
 * waited on forever.
 * SIGPIPE keeps its default action: a survivor that dies writing to the dead peer's socket is
 * a library bug (sockets must be written with MSG_NOSIGNAL) and shows up as "signal 13".
 *
 * NCCL counterpart: NCCL reports a dead peer as ncclRemoteError/ncclSystemError through
 * ncclCommGetAsyncError (src/transport/net_socket.cc, src/proxy.cc).
 * Added in: stage 1.
 */
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "p2p_fork_util.h"
#include "tccl.h"

namespace tccl {
namespace test {
namespace p2p {
namespace {

constexpr size_t kBytes = size_t{64} << 20;
constexpr double kMaxErrorSeconds = 10.0;

enum class Mode { kRecv, kSend, kGroup };

/// What the survivor reports through the pipe.
struct Report {
  char stage;    // 'R': first message done; 'E': call failed; 'A': abort returned
  int result;    // tcclResult_t of the failing call / of tcclCommAbort
  int messages;  // messages completed before the failure
};

/// One rank: joins the communicator, then streams messages with its peer. The survivor (rank 0)
/// reports progress; the victim (rank 1) streams until it is killed.
int rankMain(int rank, int port, Mode mode, const Pipe* report) {
  std::string commId = "127.0.0.1:" + std::to_string(port);
  ::setenv("TCCL_COMM_ID", commId.c_str(), 1);
  tcclUniqueId id;
  if (tcclGetUniqueId(&id) != tcclSuccess) return 2;
  tcclComm_t comm = nullptr;
  if (tcclCommInitRank(&comm, 2, id, rank) != tcclSuccess) return 3;
  std::vector<char> out(kBytes, static_cast<char>(rank + 1)), in(kBytes);
  const int peer = 1 - rank;
  // Survivor receives in kRecv mode (victim sends) and sends in kSend mode (victim receives).
  const bool sending = (mode == Mode::kSend) == (rank == 0);
  for (int i = 0; i < 100000; i++) {
    tcclResult_t r;
    if (mode == Mode::kGroup) {
      tcclGroupStart();
      tcclSend(out.data(), kBytes, tcclUint8, peer, comm, nullptr);
      tcclRecv(in.data(), kBytes, tcclUint8, peer, comm, nullptr);
      r = tcclGroupEnd();
    } else if (sending) {
      r = tcclSend(out.data(), kBytes, tcclUint8, peer, comm, nullptr);
    } else {
      r = tcclRecv(in.data(), kBytes, tcclUint8, peer, comm, nullptr);
    }
    if (report == nullptr) {  // the victim: stream until killed
      if (r != tcclSuccess) return 4;
      continue;
    }
    if (r != tcclSuccess) {
      Report e{'E', r, i};
      report->put(&e, sizeof(e));
      Report a{'A', tcclCommAbort(comm), i};
      report->put(&a, sizeof(a));
      return 0;
    }
    if (i == 0) {
      Report ready{'R', 0, 1};
      report->put(&ready, sizeof(ready));
    }
  }
  return 5;  // the survivor never saw an error
}

class PeerDeathTest : public ::testing::TestWithParam<Mode> {};

TEST_P(PeerDeathTest, SurvivorGetsAnErrorWithinTenSeconds) {
  const Mode mode = GetParam();
  const int port = freeLoopbackPort();
  ASSERT_GT(port, 0);
  Pipe pipe;
  ASSERT_GE(pipe.rd, 0);
  // Fork both ranks before anything touches tccl.
  Child survivor([&] { return rankMain(0, port, mode, &pipe); });
  ASSERT_TRUE(survivor.started());
  Child victim([&] { return rankMain(1, port, mode, nullptr); });
  ASSERT_TRUE(victim.started());
  ::close(pipe.wr);  // so a dead survivor reads as EOF
  pipe.wr = -1;

  Report ready{};
  if (!pipe.get(&ready, sizeof(ready), 60.0) || ready.stage != 'R') {
    victim.kill();
    ChildEnd v = victim.wait(5), s = survivor.wait(5);
    FAIL() << "the first " << kBytes << "-byte message did not complete; survivor " << s.describe()
           << ", victim " << v.describe();
  }
  // Let the next message get under way, then kill the victim in the middle of it.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  victim.kill();
  auto killedAt = std::chrono::steady_clock::now();
  ChildEnd v = victim.wait(10);
  EXPECT_FALSE(v.exited) << "the victim ended on its own before the kill: " << v.describe();

  Report err{};
  bool gotErr = pipe.get(&err, sizeof(err), kMaxErrorSeconds + 5);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killedAt).count();
  if (!gotErr) {
    ChildEnd s = survivor.wait(0.1);
    FAIL() << "the surviving rank did not return from its call within " << kMaxErrorSeconds + 5
           << " s of the peer's death (survivor " << s.describe() << ")";
  }
  ASSERT_EQ(err.stage, 'E');
  EXPECT_LE(seconds, kMaxErrorSeconds);
  EXPECT_TRUE(err.result == tcclRemoteError || err.result == tcclSystemError)
      << "the failing call returned " << tcclGetErrorString(static_cast<tcclResult_t>(err.result));

  Report ab{};
  EXPECT_TRUE(pipe.get(&ab, sizeof(ab), 20)) << "tcclCommAbort did not return within 20 s";
  ChildEnd s = survivor.wait(20);
  EXPECT_TRUE(s.exited && s.code == 0) << "survivor " << s.describe();
}

INSTANTIATE_TEST_SUITE_P(Modes, PeerDeathTest,
                         ::testing::Values(Mode::kRecv, Mode::kSend, Mode::kGroup),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           switch (info.param) {
                             case Mode::kRecv:
                               return std::string("WhileReceiving");
                             case Mode::kSend:
                               return std::string("WhileSending");
                             case Mode::kGroup:
                               return std::string("InGroupEnd");
                           }
                           return std::string("?");
                         });

}  // namespace
}  // namespace p2p
}  // namespace test
}  // namespace tccl
