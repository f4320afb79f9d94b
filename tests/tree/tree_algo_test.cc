/*
 * tests/tree/tree_algo_test.cc: TCCL_ALGO and the TUNING log through the public API, in one
 * process (tcclCommInitAll), run without mpirun.
 *
 * What it is:
 *  - an unknown name in TCCL_ALGO fails tcclCommInitAll/InitRank with tcclInvalidArgument and a
 *    message naming it (a typo is never a silent fallback);
 *  - TCCL_ALGO=tree leaves AllGather no algorithm: the call fails with tcclInvalidUsage and says
 *    so, and the communicator still works for what tree can do;
 *  - TCCL_DEBUG_SUBSYS=TUNING logs each decision with the model's times and the choice, and
 *    every forced algorithm gives the right all-reduce (3 ranks, one thread, one group).
 * The logging knobs are read once per process, so this file sets them before main().
 *
 * NCCL counterpart: NCCL_ALGO's parser errors ("NCCL_ALGO ... unknown") and NCCL_DEBUG_SUBSYS=TUNE.
 * Added in: stage 3.
 */
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tccl.h"
#include "../thread_devices.h"

namespace {

std::string logPath() { return "tree_algo_test." + std::to_string(getpid()) + ".log"; }

// Before main: the debug knobs are read at the first log call.
const bool kEnvSet = [] {
  setenv("TCCL_DEBUG", "INFO", 1);
  setenv("TCCL_DEBUG_SUBSYS", "TUNING", 1);
  setenv("TCCL_DEBUG_FILE", logPath().c_str(), 1);
  return true;
}();

struct AlgoEnv {  // sets TCCL_ALGO for one scope
  explicit AlgoEnv(const char* v) { setenv("TCCL_ALGO", v, 1); }
  ~AlgoEnv() { unsetenv("TCCL_ALGO"); }
};

std::vector<tcclComm_t> initAll(int n, tcclResult_t expect = tcclSuccess) {
  std::vector<tcclComm_t> comms(n, nullptr);
  const std::vector<int> devs = tccl_test::threadRankDevices(n);
  EXPECT_EQ(tcclCommInitAll(comms.data(), n, tccl_test::devlistOrNull(devs)), expect);
  return comms;
}

void destroyAll(std::vector<tcclComm_t>& comms) {
  for (tcclComm_t c : comms) {
    if (c != nullptr) {
      EXPECT_EQ(tcclCommDestroy(c), tcclSuccess);
    }
  }
}

/// One all-reduce of `count` ints on every rank, one group; checks the sums.
void allReduceAndCheck(std::vector<tcclComm_t>& comms, size_t count) {
  const int n = int(comms.size());
  std::vector<std::vector<int32_t>> in(n), out(n);
  for (int r = 0; r < n; r++) {
    in[r].resize(count);
    out[r].assign(count, -1);
    for (size_t i = 0; i < count; i++) in[r][i] = int32_t(i % 13) + r;
  }
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  for (int r = 0; r < n; r++) {
    ASSERT_EQ(tcclAllReduce(in[r].data(), out[r].data(), count, tcclInt32, tcclSum, comms[r],
                            nullptr),
              tcclSuccess);
  }
  ASSERT_EQ(tcclGroupEnd(), tcclSuccess) << tcclGetLastError(nullptr);
  for (int r = 0; r < n; r++) {
    for (size_t i = 0; i < count; i++) {
      ASSERT_EQ(out[r][i], n * int32_t(i % 13) + n * (n - 1) / 2) << "rank " << r << " i " << i;
    }
  }
}

TEST(TreeAlgo, UnknownAlgorithmFailsAtInit) {
  AlgoEnv env("ring,bogus");
  std::vector<tcclComm_t> comms = initAll(2, tcclInvalidArgument);
  for (tcclComm_t c : comms) EXPECT_EQ(c, nullptr);
  // On this thread (tcclCommInitAll's ranks warn on theirs): the message names the culprit.
  tcclUniqueId id;
  ASSERT_EQ(tcclGetUniqueId(&id), tcclSuccess);
  tcclComm_t comm = nullptr;
  EXPECT_EQ(tcclCommInitRank(&comm, 1, id, 0), tcclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(tcclGetLastError(nullptr)).find("bogus"), std::string::npos)
      << tcclGetLastError(nullptr);
}

TEST(TreeAlgo, NoAlgorithmLeftIsAnErrorPerCall) {
  AlgoEnv env("tree");
  std::vector<tcclComm_t> comms = initAll(1);
  int32_t x = 1, y[1] = {0};
  EXPECT_EQ(tcclAllGather(&x, y, 1, tcclInt32, comms[0], nullptr), tcclInvalidUsage);
  EXPECT_NE(std::string(tcclGetLastError(nullptr)).find("AllGather"), std::string::npos)
      << tcclGetLastError(nullptr);
  allReduceAndCheck(comms, 5);  // the communicator still works
  destroyAll(comms);
}

TEST(TreeAlgo, EveryForcedAlgorithmAndTheTuningLog) {
  for (const char* algo : {"ring", "tree", "recdoubling", "^ring", ""}) {
    AlgoEnv env(algo);
    std::vector<tcclComm_t> comms = initAll(3);
    for (size_t count : {size_t(0), size_t(1), size_t(2), size_t(1000), size_t(300001)}) {
      allReduceAndCheck(comms, count);
    }
    destroyAll(comms);
  }
  std::ifstream f(logPath());
  std::stringstream text;
  text << f.rdbuf();
  const std::string log = text.str();
  // "AllReduce 4 bytes 3 ranks host: ring .. us tree .. us recdoubling .. us -> recdoubling"
  // (host or device: the row of the model, device when every rank has a GPU)
  for (const char* want : {"AllReduce 4 bytes 3 ranks ", "-> ring", "-> tree",
                           "-> recdoubling", "TCCL_ALGO set by environment to tree"}) {
    EXPECT_NE(log.find(want), std::string::npos) << "no '" << want << "' in the TUNING log:\n"
                                                 << log.substr(0, 2000);
  }
  unlink(logPath().c_str());
}

}  // namespace
