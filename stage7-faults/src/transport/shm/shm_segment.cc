/*
 * transport/shm/shm_segment.cc: memfd segments and descriptor passing (shm_segment.h).
 *
 * NCCL counterpart: src/misc/shmutils.cc, src/misc/ipcsocket.cc.
 * Added in: stage 5.
 */
#include "transport/shm/shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <random>

namespace tccl {

tcclResult_t shmCreate(size_t bytes, const char* what, ShmSegment* out) {
  *out = ShmSegment{};
  // CLOEXEC: a child the user forks and execs must not inherit our FIFOs.
  int fd = memfd_create(what, MFD_CLOEXEC);
  if (fd < 0) {
    TCCL_WARN("memfd_create(%s) failed: %s", what, strerror(errno));
    return tcclSystemError;
  }
  // Reserve every page now. ftruncate alone makes a sparse file: the first touch of a page
  // that memory cannot back would then be a SIGBUS inside a collective.
  int err = posix_fallocate(fd, 0, off_t(bytes));
  if (err != 0) {
    close(fd);
    TCCL_WARN(
        "cannot reserve %zu bytes of shared memory for the SHM transport (%s): free "
        "memory, lower TCCL_BUFFSIZE, or set TCCL_SHM_DISABLE=1",
        bytes, strerror(err));
    return tcclSystemError;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    TCCL_WARN("mmap of %zu bytes of shared memory failed: %s", bytes, strerror(errno));
    return tcclSystemError;
  }
  // A fresh memfd reads as zeros: head = tail = 0, every size 0.
  *out = ShmSegment{p, bytes, fd};
  TCCL_INFO(kAlloc, "SHM segment %s: %zu bytes at %p", what, bytes, p);
  return tcclSuccess;
}

tcclResult_t shmMapFd(int fd, size_t bytes, ShmSegment* out) {
  *out = ShmSegment{};
  // The peer says how big it is; the file says how big it really is. Map no more than that,
  // or touching the tail of the mapping would be a SIGBUS.
  off_t real = lseek(fd, 0, SEEK_END);
  if (real < 0 || size_t(real) < bytes) {
    close(fd);
    TCCL_WARN("shared segment from the peer has %lld bytes, %zu expected", (long long)real, bytes);
    return tcclRemoteError;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the memory alive; the descriptor is no longer needed
  if (p == MAP_FAILED) {
    TCCL_WARN("mmap of the peer's %zu-byte segment failed: %s", bytes, strerror(errno));
    return tcclSystemError;
  }
  *out = ShmSegment{p, bytes, -1};
  return tcclSuccess;
}

void shmUnmap(ShmSegment* seg) {
  if (seg->base != nullptr) munmap(seg->base, seg->bytes);
  if (seg->fd >= 0) close(seg->fd);
  *seg = ShmSegment{};
}

namespace {

sockaddr_un socketAddress(const FdSocketName& name, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  static_assert(sizeof(a.sun_path) >= sizeof(name.bytes), "abstract name fits sun_path");
  // Abstract namespace: sun_path[0] is NUL and the name is the bytes that follow, up to len.
  const size_t n = 1 + strnlen(name.bytes + 1, sizeof(name.bytes) - 1);
  memcpy(a.sun_path, name.bytes, n);
  *len = socklen_t(offsetof(sockaddr_un, sun_path) + n);
  return a;
}

/// The process at the other end of a connected Unix socket, from the kernel (SO_PEERCRED):
/// what it cannot lie about, in our own pid namespace (0 if unknown).
pid_t socketPeerPid(int s) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.pid;
}

}  // namespace

tcclResult_t fdListen(FdListener* out) {
  *out = FdListener{};
  // pid + a counter make the name unique on this host; the random part makes it unguessable,
  // so nobody can bind it before us. (The hello, checked on accept, is what authenticates.)
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  const uint64_t nonce = (uint64_t(rd()) << 32) ^ rd();
  out->name.bytes[0] = '\0';
  snprintf(out->name.bytes + 1, sizeof(out->name.bytes) - 1, "tccl-shm-%d-%llu-%016llx",
           int(getpid()), (unsigned long long)counter.fetch_add(1), (unsigned long long)nonce);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    TCCL_WARN("socket(AF_UNIX) failed: %s", strerror(errno));
    return tcclSystemError;
  }
  socklen_t len;
  sockaddr_un a = socketAddress(out->name, &len);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd, 1) != 0) {
    TCCL_WARN("cannot listen on an abstract Unix socket: %s", strerror(errno));
    close(fd);
    return tcclSystemError;
  }
  out->fd = fd;
  return tcclSuccess;
}

tcclResult_t fdSend(const FdSocketName& name, int fdToSend, const void* hello, size_t helloBytes,
                    pid_t* peerPid) {
  // >>> exercise 5.3: a descriptor travels over a Unix socket
  *peerPid = 0;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    TCCL_WARN("socket(AF_UNIX) failed: %s", strerror(errno));
    return tcclSystemError;
  }
  socklen_t len;
  sockaddr_un a = socketAddress(name, &len);
  // A Unix-socket connect completes in the listener's backlog: the peer need not be accepting.
  if (connect(s, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    TCCL_WARN("cannot reach the peer's SHM socket (is it in another network namespace?): %s",
              strerror(errno));
    close(s);
    return tcclRemoteError;
  }
  *peerPid = socketPeerPid(s);
  iovec iov{const_cast<void*>(hello), helloBytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;  // the kernel duplicates the descriptor into the receiver
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fdToSend, sizeof(int));
  // The message is small and queued whole in the socket buffer: no partial send to resume.
  ssize_t n = sendmsg(s, &msg, MSG_NOSIGNAL);
  close(s);
  if (n != ssize_t(helloBytes)) {
    TCCL_WARN("sending a shared-memory descriptor failed: %s", n < 0 ? strerror(errno) : "short");
    return tcclSystemError;
  }
  return tcclSuccess;
  // <<< exercise 5.3
}

tcclResult_t fdAccept(FdListener* l, int timeoutMs, int* fdOut, void* hello, size_t helloBytes,
                      pid_t* peerPid) {
  // >>> exercise 5.3: a descriptor travels over a Unix socket
  *fdOut = -1;
  *peerPid = 0;
  pollfd p{l->fd, POLLIN, 0};
  int r;
  do r = poll(&p, 1, timeoutMs);
  while (r < 0 && errno == EINTR);
  if (r <= 0) {
    TCCL_WARN("the peer did not send its shared-memory segment within %d ms", timeoutMs);
    return tcclRemoteError;
  }
  int s = accept4(l->fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (s < 0) {
    TCCL_WARN("accept on the SHM socket failed: %s", strerror(errno));
    return tcclSystemError;
  }
  iovec iov{hello, helloBytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  // MSG_WAITALL: the hello was sent in one message, but a stream socket may still deliver it
  // in parts. CMSG_CLOEXEC: as for every descriptor we own.
  ssize_t n = recvmsg(s, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
  *peerPid = socketPeerPid(s);
  close(s);
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  int fd = -1;
  if (cm != nullptr && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
      cm->cmsg_len == CMSG_LEN(sizeof(int))) {
    memcpy(&fd, CMSG_DATA(cm), sizeof(int));
  }
  if (n != ssize_t(helloBytes) || fd < 0 || (msg.msg_flags & MSG_CTRUNC)) {
    if (fd >= 0) close(fd);
    TCCL_WARN("malformed message on the SHM socket (%zd bytes, descriptor %s)", n,
              fd >= 0 ? "present" : "missing");
    return tcclRemoteError;
  }
  *fdOut = fd;
  return tcclSuccess;
  // <<< exercise 5.3
}

void fdClose(FdListener* l) {
  if (l->fd >= 0) close(l->fd);
  l->fd = -1;
}

}  // namespace tccl
