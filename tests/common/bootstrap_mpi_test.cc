/*
 * tests/common/bootstrap_mpi_test.cc: the bootstrap across real processes (mpirun).
 *
 * What it checks, with every MPI rank as a bootstrap rank: the three ways to form a
 * communicator (an id from tcclGetUniqueId broadcast with MPI, TCCL_COMM_ID, torchrun's
 * environment), then an all-gather of per-process facts (pid, host hash), messages between
 * every pair of ranks with distinct tags, and barriers.
 *
 * main() comes from common/harness/mpi_main.cc. Every test first agrees across ranks
 * (allRanksOk) that the communicator formed, so one failing rank cannot hang the others.
 *
 * NCCL counterpart: nccl-tests' MPI bootstrap (MPI_Bcast of the unique id).
 * Added in: foundation (common/).
 */
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tccl/common/bootstrap.h"
#include "tccl/common/debug.h"
#include "tccl_test/harness.h"

namespace tccl {
namespace {

using test::allRanksOk;
using test::bcast;
using test::worldRank;
using test::worldSize;

struct ProcessInfo {
  int32_t rank;
  int32_t pid;
  uint64_t hostHash;
};

// The exchanges every test runs once the communicator is up.
void exercise(Bootstrap& b) {
  int rank = b.rank(), n = b.nranks();
  std::vector<ProcessInfo> info(n);
  info[rank] = {rank, static_cast<int32_t>(getpid()), getHostHash()};
  ASSERT_EQ(b.allGather(info.data(), sizeof(ProcessInfo)), tcclSuccess);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(info[r].rank, r);
    if (r != rank) {
      EXPECT_NE(info[r].pid, info[rank].pid) << "ranks are separate processes";
    }
    EXPECT_EQ(info[r].hostHash, info[rank].hostHash) << "one host under mpirun here";
  }
  // Every pair, both directions; the tag names the sender so mixing them up is caught.
  for (int peer = 0; peer < n; ++peer) {
    int64_t v = rank * 100 + peer;
    ASSERT_EQ(b.send(peer, 1000 + rank, &v, sizeof(v)), tcclSuccess);
  }
  for (int peer = n - 1; peer >= 0; --peer) {
    int64_t v = -1;
    ASSERT_EQ(b.recv(peer, 1000 + peer, &v, sizeof(v)), tcclSuccess) << lastError();
    EXPECT_EQ(v, peer * 100 + rank);
  }
  for (uint32_t tag = 0; tag < 3; ++tag) ASSERT_EQ(b.barrier(tag), tcclSuccess);
}

TEST(BootstrapMpi, UniqueIdBroadcast) {
  std::vector<char> id(kUniqueIdBytes);
  bool ok = true;
  if (worldRank() == 0) ok = bootstrapGetUniqueId(id.data()) == tcclSuccess;
  ASSERT_TRUE(allRanksOk(ok));
  bcast(id.data(), id.size(), 0);
  std::unique_ptr<Bootstrap> b;
  tcclResult_t res = Bootstrap::create(id.data(), worldRank(), worldSize(), &b);
  EXPECT_EQ(res, tcclSuccess) << lastError();
  ASSERT_TRUE(allRanksOk(res == tcclSuccess));
  exercise(*b);
}

// Rank 0 picks a free port and shares it; that is all the ranks need to agree on.
int sharedFreePort() {
  int port = 0;
  if (worldRank() == 0) {
    SocketAddress any, bound;
    SocketAddress::parse("0.0.0.0", &any);  // as the root binds: every interface
    Socket probe;
    if (probe.listen(any, &bound) == tcclSuccess) port = bound.port();
  }
  bcast(&port, sizeof(port), 0);
  return port;
}

TEST(BootstrapMpi, CommIdEnvironment) {
  int port = sharedFreePort();
  ASSERT_NE(port, 0);
  std::string comm = "127.0.0.1:" + std::to_string(port);
  setenv("TCCL_COMM_ID", comm.c_str(), 1);
  std::vector<char> id(kUniqueIdBytes);
  tcclResult_t res = bootstrapGetUniqueId(id.data());  // every rank on its own, no MPI_Bcast
  unsetenv("TCCL_COMM_ID");
  std::unique_ptr<Bootstrap> b;
  if (res == tcclSuccess) res = Bootstrap::create(id.data(), worldRank(), worldSize(), &b);
  EXPECT_EQ(res, tcclSuccess) << lastError();
  ASSERT_TRUE(allRanksOk(res == tcclSuccess));
  exercise(*b);
}

TEST(BootstrapMpi, TorchrunEnvironment) {
  int port = sharedFreePort();
  ASSERT_NE(port, 0);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  setenv("RANK", std::to_string(worldRank()).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(worldSize()).c_str(), 1);
  std::vector<char> id(kUniqueIdBytes);
  int rank = -1, nranks = -1;
  tcclResult_t res = bootstrapIdFromEnv(id.data(), &rank, &nranks);
  for (const char* v : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"}) unsetenv(v);
  EXPECT_EQ(rank, worldRank());
  EXPECT_EQ(nranks, worldSize());
  std::unique_ptr<Bootstrap> b;
  if (res == tcclSuccess) res = Bootstrap::create(id.data(), rank, nranks, &b);
  EXPECT_EQ(res, tcclSuccess) << lastError();
  ASSERT_TRUE(allRanksOk(res == tcclSuccess));
  exercise(*b);
}

}  // namespace
}  // namespace tccl
