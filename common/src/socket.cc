/*
 * common/src/socket.cc: deadline-bounded TCP sockets (the Socket class).
 *
 * What it is: the plumbing under the bootstrap and the socket transport. Every blocking
 * operation is a poll() with the time left to a deadline followed by a non-blocking system
 * call, so nothing can block past its deadline, and every send uses MSG_NOSIGNAL so a peer that
 * died gives an error code instead of killing the process with SIGPIPE.
 * Addresses and the choice of interface are in socket_address.cc.
 *
 * Invariants:
 *  - A Socket owns exactly one fd (or none) and closes it once.
 *  - Blocking calls return tcclSystemError naming the peer when the deadline passes and
 *    tcclRemoteError when the peer closed or reset the connection.
 *  - connect() keeps retrying refused connections until the deadline: in a job the listener
 *    may simply not exist yet (rank 0 is late).
 *
 * NCCL counterpart: src/misc/socket.cc (ncclSocketListen/Connect/Accept/Send/Recv,
 * ncclSocketProgress).
 * Added in: foundation (common/).
 */
#include "tccl/common/socket.h"

#include <fcntl.h>
#include <time.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "tccl/common/debug.h"

namespace tccl {

// ---- time -----------------------------------------------------------------------------------

Deadline deadlineIn(double seconds) {
  // Beyond ~30 years counts as "never": avoids overflowing the clock's representation.
  if (seconds <= 0 || seconds > 1e9) return Deadline::max();
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

namespace {

/// A receiving socket idle this long may have left delayed-ACK mode (Linux leaves it when a
/// delayed ACK times out, after 40 ms at the least): the read that ends the pause sets it again.
constexpr uint64_t kAckIdleNs = 20'000'000;

/// A cheap clock (no system call, a few ms of resolution): enough to tell a pause.
uint64_t coarseNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

void quickAckOff(int fd) {
  int zero = 0;
  setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof(zero));  // a hint: failure is harmless
}

// Milliseconds left for poll(): -1 for "never", 0 once passed, rounded up otherwise so we do
// not spin on sub-millisecond remainders.
int pollTimeoutMs(Deadline deadline) {
  if (deadline == Deadline::max()) return -1;
  auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
  return ms > 1000000 ? 1000000 : static_cast<int>(ms);
}

// Waits for `events` on fd. Returns 1 when ready, 0 on timeout, -1 on error (errno set).
int waitFor(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, pollTimeoutMs(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0 && Clock::now() < deadline) continue;  // poll woke a little early
    return rc;
  }
}

bool isRemoteClose(int err) { return err == ECONNRESET || err == EPIPE || err == ENOTCONN; }

}  // namespace

// ---- Socket ---------------------------------------------------------------------------------

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    peer_ = o.peer_;
    ahead_ = std::move(o.ahead_);
    aheadCap_ = o.aheadCap_;
    aheadBegin_ = o.aheadBegin_;
    aheadEnd_ = o.aheadEnd_;
    lazyAcks_ = o.lazyAcks_;
    lastReadNs_ = o.lastReadNs_;
    o.fd_ = -1;
    o.aheadCap_ = o.aheadBegin_ = o.aheadEnd_ = 0;
  }
  return *this;
}

bool Socket::setReadAhead(size_t bytes) {
  // Bytes already read ahead belong to the stream: dropping them would lose data.
  if (readAheadBytes() != 0) return false;
  ahead_.reset(bytes ? new char[bytes] : nullptr);
  aheadCap_ = bytes;
  aheadBegin_ = aheadEnd_ = 0;
  return true;
}

size_t Socket::takeReadAhead(void* data, size_t size) {
  const size_t k = std::min(size, readAheadBytes());
  if (k) memcpy(data, ahead_.get() + aheadBegin_, k);
  aheadBegin_ += k;
  return k;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  aheadBegin_ = aheadEnd_ = 0;  // what was read ahead belonged to that connection
}

tcclResult_t Socket::listen(const SocketAddress& addr, SocketAddress* bound, int backlog) {
  TCCL_ARG_CHECK(addr.valid(), "Socket::listen: address unset");
  close();
  int fd = socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  TCCL_SYS_CHECK(fd, "socket");
  Socket owner(fd);  // closes fd on every error path below
  // A fixed port (TCCL_COMM_ID) must be bindable right after a previous job, whose closed
  // connections linger in TIME_WAIT. Those of every listener count (an ephemeral port may be
  // the fixed port of a later job), and a TIME_WAIT socket blocks the bind unless both it and
  // the new socket have SO_REUSEADDR: so every listener sets it.
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) != 0) {
    TCCL_WARN("bind to %s failed: %s", addr.toString().c_str(), strerror(errno));
    return tcclSystemError;
  }
  TCCL_SYS_CHECK(::listen(fd, backlog), "listen");
  SocketAddress real;
  socklen_t len = sizeof(real.storage);
  TCCL_SYS_CHECK(getsockname(fd, reinterpret_cast<sockaddr*>(&real.storage), &len), "getsockname");
  real.len = len;
  if (bound != nullptr) *bound = real;
  fd_ = owner.release();
  peer_ = real;
  return tcclSuccess;
}

tcclResult_t Socket::accept(Socket* out, Deadline deadline) {
  TCCL_ARG_CHECK(out != nullptr && valid(), "Socket::accept: bad arguments");
  for (;;) {
    int ready = waitFor(fd_, POLLIN, deadline);
    if (ready == 0) {
      TCCL_WARN("timed out waiting for a connection on %s", peer_.toString().c_str());
      return tcclSystemError;
    }
    TCCL_SYS_CHECK(ready, "poll");
    SocketAddress from;
    socklen_t len = sizeof(from.storage);
    int fd = accept4(fd_, reinterpret_cast<sockaddr*>(&from.storage), &len, SOCK_CLOEXEC);
    if (fd < 0 && (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)) continue;
    TCCL_SYS_CHECK(fd, "accept");
    from.len = len;
    *out = Socket(fd);
    out->peer_ = from;
    return tcclSuccess;
  }
}

tcclResult_t Socket::connect(const SocketAddress& addr, Deadline deadline,
                             const std::atomic<uint32_t>* interrupt) {
  TCCL_ARG_CHECK(addr.valid(), "Socket::connect: address unset");
  close();
  auto backoff = std::chrono::milliseconds(1);
  const uint32_t interruptsAtStart = interrupt != nullptr ? interrupt->load() : 0;
  for (;;) {
    int fd = socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    TCCL_SYS_CHECK(fd, "socket");
    Socket attempt(fd);
    int err = 0;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) != 0) err = errno;
    if (err == EINPROGRESS) {  // handshake under way: wait for it within the deadline
      int ready = waitFor(fd, POLLOUT, deadline);
      socklen_t len = sizeof(err);
      if (ready > 0)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      else
        err = ready == 0 ? ETIMEDOUT : errno;
    }
    if (err == 0) {
      *this = std::move(attempt);
      peer_ = addr;
      return setNonBlocking(false);
    }
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EAGAIN ||
                 err == EINTR;
    if (!retry || Clock::now() >= deadline) {
      TCCL_WARN("connect to %s failed: %s%s", addr.toString().c_str(), strerror(err),
                retry ? " (gave up at the deadline)" : "");
      return tcclSystemError;
    }
    if (interrupt != nullptr && interrupt->load() != interruptsAtStart) {
      TCCL_WARN("connect to %s failed: %s (given up: the communicator was aborted)",
                addr.toString().c_str(), strerror(err));
      return tcclRemoteError;
    }
    // Short exponential backoff, never sleeping past the deadline.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    std::this_thread::sleep_for(std::min(backoff, left + std::chrono::milliseconds(1)));
    backoff = std::min(backoff * 2, decltype(backoff)(100));
  }
}

tcclResult_t Socket::sendAll(const void* data, size_t size, Deadline deadline) {
  TCCL_ARG_CHECK(valid() || size == 0, "Socket::sendAll on a closed socket");
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    int ready = waitFor(fd_, POLLOUT, deadline);
    if (ready == 0) {
      TCCL_WARN("timed out sending to %s (%zu of %zu bytes sent)", peer_.toString().c_str(), done,
                size);
      return tcclSystemError;
    }
    TCCL_SYS_CHECK(ready, "poll");
    ssize_t n = ::send(fd_, p + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n < 0) {
      TCCL_WARN("send to %s failed: %s", peer_.toString().c_str(), strerror(errno));
      return isRemoteClose(errno) ? tcclRemoteError : tcclSystemError;
    }
    done += static_cast<size_t>(n);
  }
  return tcclSuccess;
}

tcclResult_t Socket::recvAll(void* data, size_t size, Deadline deadline) {
  TCCL_ARG_CHECK(valid() || size == 0, "Socket::recvAll on a closed socket");
  char* p = static_cast<char*>(data);
  size_t done = takeReadAhead(p, size);  // what tryRecv read ahead comes first in the stream
  while (done < size) {
    int ready = waitFor(fd_, POLLIN, deadline);
    if (ready == 0) {
      TCCL_WARN("timed out receiving from %s (%zu of %zu bytes received)", peer_.toString().c_str(),
                done, size);
      return tcclSystemError;
    }
    TCCL_SYS_CHECK(ready, "poll");
    ssize_t n = ::recv(fd_, p + done, size - done, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0) {
      TCCL_WARN("connection to %s %s after %zu of %zu bytes", peer_.toString().c_str(),
                n == 0 ? "closed by the peer" : strerror(errno), done, size);
      return n == 0 || isRemoteClose(errno) ? tcclRemoteError : tcclSystemError;
    }
    done += static_cast<size_t>(n);
  }
  return tcclSuccess;
}

tcclResult_t Socket::trySend(const void* data, size_t size, size_t* done) {
  return trySend2(data, size, nullptr, 0, done);  // one piece: the second iovec is empty
}

tcclResult_t Socket::trySend2(const void* a, size_t aSize, const void* b, size_t bSize,
                              size_t* done) {
  if (aSize + bSize == 0) return tcclSuccess;
  iovec iov[2] = {{const_cast<void*>(a), aSize}, {const_cast<void*>(b), bSize}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return tcclSuccess;
  if (n < 0) {
    TCCL_WARN("send to %s failed: %s", peer_.toString().c_str(), strerror(errno));
    return isRemoteClose(errno) ? tcclRemoteError : tcclSystemError;
  }
  *done += static_cast<size_t>(n);
  return tcclSuccess;
}

tcclResult_t Socket::tryRecv(void* data, size_t size, size_t* done) {
  if (size == 0) return tcclSuccess;
  if (readAheadBytes() == 0 && size < aheadCap_) {
    // A small read: ask for a whole buffer. What follows these bytes in the stream (the
    // payload behind a header, the next header) then costs no system call of its own.
    aheadBegin_ = aheadEnd_ = 0;
    tcclResult_t rc = recvSome(ahead_.get(), aheadCap_, &aheadEnd_);
    // Nothing there: asking again for fewer bytes would only repeat the system call (and a
    // waiter polls this in a loop).
    if (rc != tcclSuccess || aheadEnd_ == 0) return rc;
  }
  if (readAheadBytes() > 0) {
    // Only what was read ahead, even when more is wanted: a short read sends the caller to
    // poll(), which finds the socket readable if the kernel has more. (So whenever a read
    // comes up short, the read-ahead is empty: a caller that then sleeps in poll() on this
    // socket leaves nothing behind in it.)
    *done += takeReadAhead(data, size);
    return tcclSuccess;
  }
  return recvSome(data, size, done);
}

tcclResult_t Socket::recvSome(void* data, size_t size, size_t* done) {
  ssize_t n = ::recv(fd_, data, size, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return tcclSuccess;
  if (n <= 0) {
    TCCL_WARN("connection to %s %s", peer_.toString().c_str(),
              n == 0 ? "closed by the peer" : strerror(errno));
    return n == 0 || isRemoteClose(errno) ? tcclRemoteError : tcclSystemError;
  }
  *done += static_cast<size_t>(n);
  if (lazyAcks_) {
    const uint64_t now = coarseNowNs();
    if (now - lastReadNs_ > kAckIdleNs) quickAckOff(fd_);  // delayAcks: the mode may be gone
    lastReadNs_ = now;
  }
  return tcclSuccess;
}

tcclResult_t Socket::setNonBlocking(bool on) {
  int flags = fcntl(fd_, F_GETFL);
  TCCL_SYS_CHECK(flags, "fcntl(F_GETFL)");
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  TCCL_SYS_CHECK(fcntl(fd_, F_SETFL, flags), "fcntl(F_SETFL)");
  return tcclSuccess;
}

void Socket::delayAcks() {
  lazyAcks_ = true;
  lastReadNs_ = coarseNowNs();
  quickAckOff(fd_);
}

void Socket::tuneForData(int bufferBytes) {
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (bufferBytes > 0) {
    setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &bufferBytes, sizeof(bufferBytes));
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bufferBytes, sizeof(bufferBytes));
  }
}

}  // namespace tccl
