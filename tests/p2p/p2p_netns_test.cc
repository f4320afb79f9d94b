/*
 * tests/p2p/p2p_netns_test.cc: two "hosts" on one machine: ranks in two network namespaces.
 *
 * What it is: the cross-host test. The test process creates two network namespaces joined by
 * a veth pair (10.231.7.1/30 <-> 10.231.7.2/30, addresses that exist only inside those
 * namespaces), forks one rank into each (setns), and gives them different TCCL_HOSTID values so
 * tccl treats them as two hosts, and TCCL_SOCKET_IFNAME set to their end of the veth. The ranks
 * exchange messages of several sizes with tcclSendRecv, then run an alltoall, and check every
 * byte. The only route between the ranks is the veth, so every byte crossed "the network".
 *
 * Invariants: the namespaces are deleted when the test ends, passed or failed (RAII), and
 * leftovers of earlier runs that were killed are removed first (their names carry the pid of
 * a process that no longer exists). Skipped, not failed, where the machine cannot make the two
 * hosts: `ip netns add` not permitted, or any other `ip` command of the setup refused (no veth
 * support, or `ip -n` unable to remount "/" in a chroot whose root is not a mount point); the
 * skip names the command and what it printed. Only tccl's own calls can fail the test.
 * The test process makes no tccl call; both ranks are fresh forked children.
 *
 * NCCL counterpart: running nccl-tests across two nodes over the socket transport
 * (NCCL_SOCKET_IFNAME, NCCL_HOSTID).
 * Added in: stage 1.
 */
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "p2p_fork_util.h"
#include "tccl.h"

namespace tccl {
namespace test {
namespace p2p {
namespace {

constexpr const char* kNsPrefix = "tccl-p2p-";
constexpr int kPort = 29517;  // any port: the namespaces are new, nothing else listens there

/// Runs a shell command quietly; true on exit status 0.
bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

/// Runs a shell command; true on exit status 0, else false with its output in *out.
bool shOut(const std::string& cmd, std::string* out) {
  FILE* f = ::popen((cmd + " 2>&1").c_str(), "r");
  if (f == nullptr) return false;
  char buf[256];
  out->clear();
  while (std::fgets(buf, sizeof(buf), f) != nullptr) *out += buf;
  while (!out->empty() && out->back() == '\n') out->pop_back();
  return ::pclose(f) == 0;
}

/// Deletes namespaces left by earlier runs of this test whose process is gone.
void removeStaleNamespaces() {
  FILE* f = ::popen("ip netns list 2>/dev/null", "r");
  if (f == nullptr) return;
  char line[256];
  std::vector<std::string> stale;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    std::string name(line);
    name = name.substr(0, name.find_first_of(" \n"));
    if (name.rfind(kNsPrefix, 0) != 0) continue;
    long pid = std::atol(name.c_str() + std::strlen(kNsPrefix));
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(name);
  }
  ::pclose(f);
  for (const auto& name : stale) sh("ip netns del " + name);
}

/// Two namespaces and a veth pair between them; torn down in the destructor.
class TwoHosts {
 public:
  TwoHosts() {
    std::string pid = std::to_string(::getpid());
    for (int i = 0; i < 2; i++) {
      ns_[i] = kNsPrefix + pid + "-" + std::to_string(i);
      veth_[i] = "tcclv" + pid + (i == 0 ? "a" : "b");  // <= 15 characters (IFNAMSIZ)
      addr_[i] = i == 0 ? "10.231.7.1" : "10.231.7.2";
    }
  }
  ~TwoHosts() {
    for (int i = 0; i < 2; i++)
      if (created_[i]) sh("ip netns del " + ns_[i]);  // also deletes the veth end inside
    sh("ip link del " + veth_[0]);                    // in case it never moved
  }
  /// Creates the first namespace; false when not permitted (the caller skips).
  bool tryCreate(std::string* why) {
    removeStaleNamespaces();
    created_[0] = sh("ip netns add " + ns_[0]);
    if (!created_[0]) {
      *why = "`ip netns add` is not permitted here";
      return false;
    }
    return true;
  }
  /// The rest of the setup; false (with the failing command and its output) on any error.
  bool setUp(std::string* why) {
    created_[1] = sh("ip netns add " + ns_[1]);
    std::vector<std::string> cmds;
    if (!created_[1]) cmds.push_back("ip netns add " + ns_[1]);
    cmds.push_back("ip link add " + veth_[0] + " type veth peer name " + veth_[1]);
    for (int i = 0; i < 2; i++) {
      cmds.push_back("ip link set " + veth_[i] + " netns " + ns_[i]);
      cmds.push_back("ip -n " + ns_[i] + " addr add " + addr_[i] + "/30 dev " + veth_[i]);
      cmds.push_back("ip -n " + ns_[i] + " link set " + veth_[i] + " up");
      cmds.push_back("ip -n " + ns_[i] + " link set lo up");
    }
    for (const auto& c : cmds) {
      std::string out;
      if (!shOut(c, &out)) {
        *why = "this machine cannot make the two hosts: `" + c + "` failed: " + out;
        return false;
      }
    }
    return true;
  }
  const std::string& ns(int i) const { return ns_[i]; }
  const std::string& veth(int i) const { return veth_[i]; }
  const std::string& addr(int i) const { return addr_[i]; }

 private:
  std::string ns_[2], veth_[2], addr_[2];
  bool created_[2] = {false, false};
};

uint8_t byteOf(int src, size_t size, size_t i) {
  return static_cast<uint8_t>((i * 131 + size * 7 + src * 71 + (i >> 9)) & 0xff);
}

/// One rank, run in a forked child: enter the namespace, join, exchange, check.
int rankMain(const TwoHosts& hosts, int rank) {
  std::string path = "/var/run/netns/" + hosts.ns(rank);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "rank %d: cannot enter %s: %s\n", rank, path.c_str(),
                 std::strerror(errno));
    return 10;
  }
  ::close(fd);
  std::string commId = hosts.addr(0) + ":" + std::to_string(kPort);
  ::setenv("TCCL_COMM_ID", commId.c_str(), 1);
  ::setenv("TCCL_HOSTID", rank == 0 ? "tccl-netns-host-a" : "tccl-netns-host-b", 1);
  ::setenv("TCCL_SOCKET_IFNAME", hosts.veth(rank).c_str(), 1);

  tcclUniqueId id;
  tcclComm_t comm = nullptr;
  tcclResult_t r = tcclGetUniqueId(&id);
  if (r == tcclSuccess) r = tcclCommInitRank(&comm, 2, id, rank);
  if (r != tcclSuccess) {
    std::fprintf(stderr, "rank %d: init failed: %s: %s\n", rank, tcclGetErrorString(r),
                 tcclGetLastError(nullptr));
    return 11;
  }
  const int peer = 1 - rank;
  const size_t sizes[] = {0, 1, 4097, (size_t{1} << 20) + 3, (size_t{16} << 20) + 5};
  for (size_t size : sizes) {
    std::vector<uint8_t> out(size + 1), in(size + 1, 0xee);
    for (size_t i = 0; i < size; i++) out[i] = byteOf(rank, size, i);
    r = tcclSendRecv(out.data(), in.data(), size, tcclUint8, peer, peer, comm, nullptr);
    if (r != tcclSuccess) {
      std::fprintf(stderr, "rank %d: sendrecv of %zu bytes: %s: %s\n", rank, size,
                   tcclGetErrorString(r), tcclGetLastError(comm));
      return 12;
    }
    for (size_t i = 0; i <= size; i++) {
      uint8_t want = i == size ? 0xee : byteOf(peer, size, i);  // the last byte is a guard
      if (in[i] != want) {
        std::fprintf(stderr, "rank %d: sendrecv of %zu bytes: byte %zu is %d, expected %d\n", rank,
                     size, i, in[i], want);
        return 13;
      }
    }
  }
  // Alltoall: block j of rank r is byteOf(10*r + j, ...).
  const size_t blk = (size_t{2} << 20) + 1;
  std::vector<uint8_t> out(2 * blk), in(2 * blk, 0xee);
  for (int j = 0; j < 2; j++)
    for (size_t i = 0; i < blk; i++) out[j * blk + i] = byteOf(10 * rank + j, blk, i);
  r = tcclAlltoAll(out.data(), in.data(), blk, tcclUint8, comm, nullptr);
  if (r != tcclSuccess) {
    std::fprintf(stderr, "rank %d: alltoall: %s: %s\n", rank, tcclGetErrorString(r),
                 tcclGetLastError(comm));
    return 14;
  }
  for (int j = 0; j < 2; j++)
    for (size_t i = 0; i < blk; i++)
      if (in[j * blk + i] != byteOf(10 * j + rank, blk, i)) {
        std::fprintf(stderr, "rank %d: alltoall block %d byte %zu wrong\n", rank, j, i);
        return 15;
      }
  r = tcclCommDestroy(comm);
  return r == tcclSuccess ? 0 : 16;
}

TEST(NetnsTest, TwoHostsOverVeth) {
  TwoHosts hosts;
  std::string why;
  if (!hosts.tryCreate(&why)) GTEST_SKIP() << why;
  if (!hosts.setUp(&why)) GTEST_SKIP() << why;
  Child r0([&] { return rankMain(hosts, 0); });
  ASSERT_TRUE(r0.started());
  Child r1([&] { return rankMain(hosts, 1); });
  ASSERT_TRUE(r1.started());
  ChildEnd e0 = r0.wait(120), e1 = r1.wait(120);
  EXPECT_TRUE(e0.exited && e0.code == 0) << "rank 0 (" << hosts.ns(0) << "): " << e0.describe();
  EXPECT_TRUE(e1.exited && e1.code == 0) << "rank 1 (" << hosts.ns(1) << "): " << e1.describe();
}

}  // namespace
}  // namespace p2p
}  // namespace test
}  // namespace tccl
