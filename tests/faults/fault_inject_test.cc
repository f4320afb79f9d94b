/*
 * tests/faults/fault_inject_test.cc: fault injection (TCCL_FAULT, stage 7) and what the
 * library makes of each fault, seen from every rank.
 *
 * What it is: each test starts its ranks as processes of its own (fork, no MPI: mpirun ends
 * the whole job when one rank dies, and a dying rank is the point here), joined through
 * TCCL_COMM_ID on 127.0.0.1, and checks how each rank ended (exit code, or the signal that
 * killed it) against what chapter 7 promises:
 *  - kill: rank 1 dies (SIGKILL) as it calls all-reduce 2; the survivors' all-reduce 2 returns
 *    tcclRemoteError well within TCCL_TIMEOUT (the dead peer is noticed, not waited out); they
 *    shrink the communicator without it (TCCL_SHRINK_ABORT) and the next all-reduce sums the
 *    two of them; destroying the old communicator, a peer gone, returns;
 *  - drop (network): rank 0's sends vanish from all-reduce 2 on: every rank's all-reduce 2
 *    ends in tcclRemoteError within TCCL_TIMEOUT=2 plus a margin -- by its own watchdog,
 *    naming the operation, or by a peer's abort closing a connection first;
 *  - cut (network): rank 0's connection closes: both ranks' all-reduce 2 fail within 5 s,
 *    long before the 20 s timeout;
 *  - flip (network): all-reduce 2 succeeds everywhere with a wrong sum somewhere (silent
 *    corruption), all-reduce 3 is right again;
 *  - delay (network): all-reduce 2 is right, and takes at least the delay on rank 1;
 *  - stall: rank 1 calls all-reduce 2 2.5 s late; the others' watchdogs (1 s) fire and dump;
 *    rank 1 dumps through the API; tools/frtrace names rank 1 the straggler of collective 2.
 * The network faults run with P2P and SHM off (they act on NET connectors).
 *
 * Invariants: every rank runs under a deadline (30 s: then it is killed and the test fails);
 * a rank reports through its exit code (0: as promised; see Code).
 *
 * NCCL counterpart: none (NCCL's fault tests kill processes by hand); PyTorch's
 * test_c10d_nccl.py kills ranks to test its watchdog the same way.
 * Added in: stage 7.
 */
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tccl.h"

namespace {

using Clock = std::chrono::steady_clock;
using Env = std::vector<std::pair<std::string, std::string>>;

/// How a rank tells the parent what went wrong.
enum Code : int {
  kOk = 0,
  kInitFailed = 2,
  kUnexpected = 3,   // a call's result was not the one promised
  kTooSlow = 4,      // it came, but later than promised
  kTooFast = 5,      // (delay) it came sooner than the delay allows
  kWrongData = 10,   // a result differs from the reference
  kOkUnnamed = 11,   // the promised error, from a peer's failure rather than its own watchdog
};

struct RankEnd {
  bool exited = false;
  int code = -1;
  int signal = 0;
};

/// A free TCP port on 127.0.0.1 (asked of the kernel, then released for the root to take).
int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

/// Runs body(rank, n) in n processes with `env` set; each one's end, after at most 30 s.
std::vector<RankEnd> runRanks(int n, const Env& env, const std::function<int(int, int)>& body) {
  const std::string commId = "127.0.0.1:" + std::to_string(freePort());
  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      setenv("TCCL_COMM_ID", commId.c_str(), 1);
      const int code = body(r, n);
      fflush(stdout);
      fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<RankEnd> ends(static_cast<size_t>(n));
  std::vector<bool> done(size_t(n), false);
  const auto until = Clock::now() + std::chrono::seconds(30);
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; r++) {
      int status = 0;
      if (done[size_t(r)] || waitpid(pids[size_t(r)], &status, WNOHANG) != pids[size_t(r)]) continue;
      done[size_t(r)] = true;
      left--;
      ends[size_t(r)].exited = WIFEXITED(status);
      ends[size_t(r)].code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      ends[size_t(r)].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    if (left > 0 && Clock::now() > until) {
      for (int r = 0; r < n; r++) {
        if (!done[size_t(r)]) kill(pids[size_t(r)], SIGKILL);
      }
      for (int r = 0; r < n; r++) {
        if (!done[size_t(r)]) waitpid(pids[size_t(r)], nullptr, 0);
      }
      ADD_FAILURE() << "ranks still running after 30 s: killed";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ends;
}

tcclComm_t initRank(int rank, int n) {
  tcclUniqueId id;
  tcclComm_t comm = nullptr;
  // (TCCL_COMM_ID: every rank computes the same id; rank 0 starts the root.)
  if (tcclGetUniqueId(&id) != tcclSuccess || tcclCommInitRank(&comm, n, id, rank) != tcclSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", rank, tcclGetLastError(nullptr));
    return nullptr;
  }
  return comm;
}

/// An all-reduce of `count` int32 (rank + 1) over comm; its result, its time in seconds.
tcclResult_t allReduce(tcclComm_t comm, int rank, std::vector<int32_t>* out, double* seconds,
                       size_t count = 8192) {
  out->assign(count, rank + 1);
  const auto t0 = Clock::now();
  tcclResult_t res =
      tcclAllReduce(out->data(), out->data(), count, tcclInt32, tcclSum, comm, nullptr);
  *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

bool allEqual(const std::vector<int32_t>& v, int32_t x) {
  for (int32_t e : v) {
    if (e != x) return false;
  }
  return true;
}

const Env kNetOnly = {{"TCCL_P2P_DISABLE", "1"}, {"TCCL_SHM_DISABLE", "1"}};

Env with(Env env, const Env& more) {
  env.insert(env.end(), more.begin(), more.end());
  return env;
}

void expectAll(const std::vector<RankEnd>& ends, int code) {
  for (size_t r = 0; r < ends.size(); r++) {
    EXPECT_TRUE(ends[r].exited) << "rank " << r << " died of signal " << ends[r].signal;
    EXPECT_EQ(ends[r].code, code) << "rank " << r;
  }
}

TEST(FaultInject, KillOneRankSurvivorsShrinkAndGoOn) {
  const Env env = {{"TCCL_FAULT", "kill"}, {"TCCL_FAULT_RANK", "1"}, {"TCCL_FAULT_OP", "2"},
                   {"TCCL_TIMEOUT", "20"}};
  auto ends = runRanks(3, env, [](int rank, int n) {
    tcclComm_t comm = initRank(rank, n);
    if (comm == nullptr) return int(kInitFailed);
    std::vector<int32_t> v;
    double s = 0;
    if (allReduce(comm, rank, &v, &s) != tcclSuccess || !allEqual(v, 6)) return int(kWrongData);
    // Rank 1 dies as it calls this one.
    const tcclResult_t res = allReduce(comm, rank, &v, &s);
    if (res != tcclRemoteError) return int(kUnexpected);
    if (s > 10) return int(kTooSlow);  // noticed, not waited out (TCCL_TIMEOUT=20)
    int gone = 1;
    tcclComm_t rest = nullptr;
    if (tcclCommShrink(comm, &gone, 1, &rest, nullptr, TCCL_SHRINK_ABORT) != tcclSuccess) {
      return int(kUnexpected);
    }
    int count = 0;
    tcclCommCount(rest, &count);
    if (count != 2) return int(kUnexpected);
    if (allReduce(rest, rank, &v, &s) != tcclSuccess || !allEqual(v, 1 + 3)) {
      return int(kWrongData);
    }
    if (tcclCommDestroy(rest) != tcclSuccess) return int(kUnexpected);
    tcclCommDestroy(comm);  // (a peer gone: it must return; its result is the error it had)
    return int(kOk);
  });
  ASSERT_EQ(ends.size(), 3u);
  EXPECT_EQ(ends[1].signal, SIGKILL);
  for (int r : {0, 2}) {
    EXPECT_TRUE(ends[size_t(r)].exited) << "rank " << r;
    EXPECT_EQ(ends[size_t(r)].code, kOk) << "rank " << r;
  }
}

/// All-reduce 2 must end in `expected` on every rank within `limit` s.
int secondFails(int rank, int n, tcclResult_t expected, double limit, const char* mention) {
  tcclComm_t comm = initRank(rank, n);
  if (comm == nullptr) return kInitFailed;
  std::vector<int32_t> v;
  double s = 0;
  if (allReduce(comm, rank, &v, &s) != tcclSuccess) return kUnexpected;
  const tcclResult_t res = allReduce(comm, rank, &v, &s);
  const std::string why = tcclGetLastError(comm);
  fprintf(stderr, "rank %d: all-reduce 2 returned %s after %.2f s: %s\n", rank,
          tcclGetErrorString(res), s, why.c_str());
  int code = kOk;
  if (res != expected) code = kUnexpected;
  if (code == kOk && s > limit) code = kTooSlow;
  if (code == kOk && mention != nullptr && why.find(mention) == std::string::npos) code = kOkUnnamed;
  tcclCommAbort(comm);
  return code;
}

TEST(FaultInject, DropEndsInTheWatchdogOnEveryRank) {
  const Env env = with(kNetOnly, {{"TCCL_FAULT", "drop"}, {"TCCL_FAULT_RANK", "0"},
                                  {"TCCL_FAULT_OP", "2"}, {"TCCL_TIMEOUT", "2"}});
  // Each rank's watchdog fires, or a peer's abort closes the connection it waits on first.
  auto ends = runRanks(3, env, [](int rank, int n) {
    return secondFails(rank, n, tcclRemoteError, 2 + 4, "has not completed after");
  });
  int named = 0;
  for (size_t r = 0; r < ends.size(); r++) {
    EXPECT_TRUE(ends[r].exited && (ends[r].code == kOk || ends[r].code == kOkUnnamed))
        << "rank " << r << " code " << ends[r].code;
    named += ends[r].code == kOk ? 1 : 0;
  }
  EXPECT_GE(named, 1) << "no rank's error named the operation its watchdog gave up on";
}

TEST(FaultInject, CutFailsAtOnce) {
  const Env env = with(kNetOnly, {{"TCCL_FAULT", "cut"}, {"TCCL_FAULT_RANK", "0"},
                                  {"TCCL_FAULT_OP", "2"}, {"TCCL_TIMEOUT", "20"}});
  expectAll(runRanks(2, env, [](int rank, int n) {
              return secondFails(rank, n, tcclRemoteError, 5, nullptr);
            }),
            kOk);
}

TEST(FaultInject, FlipCorruptsSilentlyOnce) {
  const Env env = with(kNetOnly, {{"TCCL_FAULT", "flip"}, {"TCCL_FAULT_RANK", "0"},
                                  {"TCCL_FAULT_OP", "2"}});
  auto ends = runRanks(2, env, [](int rank, int n) {
    tcclComm_t comm = initRank(rank, n);
    if (comm == nullptr) return int(kInitFailed);
    std::vector<int32_t> v;
    double s = 0;
    if (allReduce(comm, rank, &v, &s) != tcclSuccess || !allEqual(v, 3)) return int(kUnexpected);
    if (allReduce(comm, rank, &v, &s) != tcclSuccess) return int(kUnexpected);
    const bool corrupt = !allEqual(v, 3);
    if (allReduce(comm, rank, &v, &s) != tcclSuccess || !allEqual(v, 3)) return int(kUnexpected);
    tcclCommDestroy(comm);
    return int(corrupt ? kWrongData : kOk);
  });
  int corrupt = 0;
  for (size_t r = 0; r < ends.size(); r++) {
    EXPECT_TRUE(ends[r].exited && (ends[r].code == kOk || ends[r].code == kWrongData))
        << "rank " << r << " code " << ends[r].code;
    corrupt += ends[r].code == kWrongData ? 1 : 0;
  }
  EXPECT_GE(corrupt, 1) << "the flipped byte reached no rank's result";
}

TEST(FaultInject, DelayIsOnlySlow) {
  const Env env = with(kNetOnly, {{"TCCL_FAULT", "delay"}, {"TCCL_FAULT_RANK", "0"},
                                  {"TCCL_FAULT_OP", "2"}, {"TCCL_FAULT_DELAY_MS", "1500"}});
  expectAll(runRanks(2, env, [](int rank, int n) {
              tcclComm_t comm = initRank(rank, n);
              if (comm == nullptr) return int(kInitFailed);
              std::vector<int32_t> v;
              double s = 0;
              if (allReduce(comm, rank, &v, &s) != tcclSuccess) return int(kUnexpected);
              if (allReduce(comm, rank, &v, &s) != tcclSuccess || !allEqual(v, 3)) {
                return int(kWrongData);
              }
              tcclCommDestroy(comm);
              // Rank 1 waits for rank 0's delayed step.
              return int(rank == 1 && s < 1.4 ? kTooFast : kOk);
            }),
            kOk);
}

TEST(FaultInject, StallIsNamedTheStraggler) {
  const std::string dir = testing::TempDir() + "tccl_stall_" + std::to_string(getpid());
  ASSERT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  const Env env = {{"TCCL_FAULT", "stall"}, {"TCCL_FAULT_RANK", "1"}, {"TCCL_FAULT_OP", "2"},
                   {"TCCL_FAULT_DELAY_MS", "2500"}, {"TCCL_TIMEOUT", "1"},
                   {"TCCL_FR_DUMP", dir + "/fr_"}};
  expectAll(runRanks(3, env, [](int rank, int n) {
              tcclComm_t comm = initRank(rank, n);
              if (comm == nullptr) return int(kInitFailed);
              std::vector<int32_t> v;
              double s = 0;
              if (allReduce(comm, rank, &v, &s) != tcclSuccess) return int(kUnexpected);
              const tcclResult_t res = allReduce(comm, rank, &v, &s);
              // The others' watchdogs dumped; the straggler writes its own. (The others stay
              // a second: a rank that exits early ends its peers' calls before their
              // watchdogs fire, and those would leave no dump.)
              if (rank == 1) tcclCommDumpFlightRecorder(comm, nullptr);
              if (rank != 1) std::this_thread::sleep_for(std::chrono::seconds(1));
              tcclCommAbort(comm);
              return int(res == tcclRemoteError ? kOk : kUnexpected);
            }),
            kOk);
  const std::string cmd = std::string(TCCL_FRTRACE) + " analyze " + dir + " --prefix fr_ 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string report;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) report += buf;
  pclose(p);
  EXPECT_NE(report.find("did not complete on rank(s) [0, 1, 2]; straggler: rank 1, "),
            std::string::npos)
      << report;
  EXPECT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace
