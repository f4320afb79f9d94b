/*
 * tests/shm/shm_test.cc: the SHM transport -- its segments, its descriptor passing, and what
 * a communicator leaves behind.
 *
 * What it checks:
 *  - Segments (one process): a memfd segment created here and mapped again from the
 *    descriptor that travelled over an abstract Unix socket is the same memory; the hello
 *    arrives intact and the kernel names our own pid as the peer; a message without a
 *    descriptor, a peer that never sends, and a file shorter than announced are errors, not
 *    crashes or hangs.
 *  - A communicator (every rank, host buffers): an all-reduce is right; while the
 *    communicator lives, this process maps FIFO segments ("memfd:tccl-fifo" in
 *    /proc/self/maps) if and only if SHM is allowed (TCCL_SHM_DISABLE unset) and there is a
 *    peer; it holds no memfd descriptor (all closed once mapped); after destroy it maps none;
 *    /dev/shm never holds anything of ours.
 * The rank-killed-mid-collective case is tests/p2p/p2p_peer_death_test.cc, which runs over SHM
 * from stage 5 on; its check that /dev/shm is clean is this test's ShmLeavesNothing at every
 * rank count.
 *
 * NCCL counterpart: none (NCCL's SHM transport is tested through its collectives).
 * Added in: stage 5.
 */
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tccl.h"
#include "tccl_test/harness.h"
#include "transport/shm/shm_segment.h"

namespace tccl {
namespace test {
namespace {

/// Entries of /dev/shm whose name mentions tccl.
std::set<std::string> devShmOfOurs() {
  std::set<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (strstr(e->d_name, "tccl") != nullptr) out.insert(e->d_name);
    }
    closedir(d);
  }
  return out;
}

/// Lines of /proc/self/maps that map one of our FIFO segments.
int fifoMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("memfd:tccl-fifo") != std::string::npos) n++;
  }
  return n;
}

/// Open descriptors of this process that refer to a memfd of ours.
int fifoDescriptors() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char path[300], target[256];
      snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
      ssize_t len = readlink(path, target, sizeof(target) - 1);
      if (len <= 0) continue;
      target[len] = '\0';
      if (strstr(target, "memfd:tccl-fifo") != nullptr) n++;
    }
    closedir(d);
  }
  return n;
}

struct Hello {
  uint64_t magic;
  int32_t rank;
  int32_t pad;
};

TEST(ShmSegment, DescriptorTravelsAndMapsTheSameMemory) {
  if (worldRank() != 0) GTEST_SKIP() << "one process is enough";
  ShmSegment a;
  ASSERT_EQ(shmCreate(1 << 20, "tccl-fifo-test", &a), tcclSuccess);
  memset(a.base, 0x5a, a.bytes);
  FdListener l;
  ASSERT_EQ(fdListen(&l), tcclSuccess);
  EXPECT_EQ(l.name.bytes[0], '\0') << "an abstract name starts with NUL: no file is created";
  Hello sent{0x1234, 7, 0};
  pid_t listenerPid = 0;
  ASSERT_EQ(fdSend(l.name, a.fd, &sent, sizeof(sent), &listenerPid), tcclSuccess);
  int fd = -1;
  Hello got{};
  pid_t senderPid = 0;
  ASSERT_EQ(fdAccept(&l, 5000, &fd, &got, sizeof(got), &senderPid), tcclSuccess);
  fdClose(&l);
  EXPECT_EQ(got.magic, sent.magic);
  EXPECT_EQ(got.rank, 7);
  EXPECT_EQ(listenerPid, getpid());
  EXPECT_EQ(senderPid, getpid());
  ShmSegment b;
  ASSERT_EQ(shmMapFd(fd, a.bytes, &b), tcclSuccess);
  EXPECT_NE(a.base, b.base) << "two mappings of one memory";
  EXPECT_EQ(static_cast<unsigned char*>(b.base)[12345], 0x5a);
  static_cast<unsigned char*>(b.base)[777] = 0x11;            // a write through one mapping ...
  EXPECT_EQ(static_cast<unsigned char*>(a.base)[777], 0x11);  // ... is seen through the other
  shmUnmap(&b);
  shmUnmap(&a);
  EXPECT_EQ(fifoDescriptors(), 0);
  EXPECT_EQ(fifoMappings(), 0);
}

TEST(ShmSegment, MessageWithoutDescriptorIsRefused) {
  if (worldRank() != 0) GTEST_SKIP() << "one process is enough";
  FdListener l;
  ASSERT_EQ(fdListen(&l), tcclSuccess);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const size_t n = 1 + strlen(l.name.bytes + 1);
  memcpy(a.sun_path, l.name.bytes, n);
  const socklen_t len = socklen_t(offsetof(sockaddr_un, sun_path) + n);
  ASSERT_EQ(connect(s, reinterpret_cast<sockaddr*>(&a), len), 0);
  Hello h{1, 2, 0};
  ASSERT_EQ(send(s, &h, sizeof(h), 0), ssize_t(sizeof(h)));  // bytes, but no SCM_RIGHTS
  close(s);
  int fd = -1;
  Hello got{};
  pid_t pid = 0;
  EXPECT_EQ(fdAccept(&l, 5000, &fd, &got, sizeof(got), &pid), tcclRemoteError);
  EXPECT_EQ(fd, -1);
  fdClose(&l);
}

TEST(ShmSegment, PeerThatNeverSendsTimesOut) {
  if (worldRank() != 0) GTEST_SKIP() << "one process is enough";
  FdListener l;
  ASSERT_EQ(fdListen(&l), tcclSuccess);
  int fd = -1;
  Hello got{};
  pid_t pid = 0;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(fdAccept(&l, 100, &fd, &got, sizeof(got), &pid), tcclRemoteError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  fdClose(&l);
}

TEST(ShmSegment, ShorterThanAnnouncedIsRefused) {
  if (worldRank() != 0) GTEST_SKIP() << "one process is enough";
  ShmSegment a;
  ASSERT_EQ(shmCreate(4096, "tccl-fifo-test", &a), tcclSuccess);
  ShmSegment b;
  // A peer that claims 8 KiB for a 4 KiB file: mapping it would SIGBUS on the second page.
  EXPECT_EQ(shmMapFd(dup(a.fd), 8192, &b), tcclRemoteError);
  EXPECT_EQ(b.base, nullptr);
  shmUnmap(&a);
}

TEST(ShmComm, AllReduceOverShmLeavesNothing) {
  const std::set<std::string> before = devShmOfOurs();
  const bool shmAllowed =
      getenv("TCCL_SHM_DISABLE") == nullptr || strcmp(getenv("TCCL_SHM_DISABLE"), "0") == 0;
  tcclUniqueId id{};
  if (worldRank() == 0) {
    ASSERT_EQ(tcclGetUniqueId(&id), tcclSuccess);
  }
  bcast(&id, sizeof(id), 0);
  tcclComm_t comm = nullptr;
  ASSERT_EQ(tcclCommInitRank(&comm, worldSize(), id, worldRank()), tcclSuccess);
  const size_t count = (size_t(1) << 20) + 3;  // several FIFO steps, not a multiple of anything
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; i++) in[i] = float((worldRank() + 1) * int(i % 97));
  ASSERT_EQ(tcclAllReduce(in.data(), out.data(), count, tcclFloat32, tcclSum, comm, nullptr),
            tcclSuccess);
  const int n = worldSize();
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) {
    if (out[i] != float(n * (n + 1) / 2 * int(i % 97))) wrong++;
  }
  EXPECT_EQ(wrong, 0u);
  const int mapped = fifoMappings();
  if (shmAllowed && n > 1) {
    // A ring: at least our send FIFO to the next rank and our receive FIFO from the previous.
    EXPECT_GE(mapped, 2) << "SHM is allowed and ranks share this host: the FIFOs should be in "
                            "shared memory";
  } else {
    EXPECT_EQ(mapped, 0) << (n > 1 ? "TCCL_SHM_DISABLE=1 must keep SHM out" : "one rank: no FIFO");
  }
  EXPECT_EQ(fifoDescriptors(), 0) << "every segment descriptor is closed once mapped";
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
  EXPECT_EQ(fifoMappings(), 0) << "destroy unmaps every segment";
  EXPECT_EQ(devShmOfOurs(), before) << "/dev/shm is never used";
  barrier();
}

}  // namespace
}  // namespace test
}  // namespace tccl
