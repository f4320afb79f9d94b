/*
 * common/socket.h: TCP sockets for the bootstrap and the socket transport.
 *
 * What it is: addresses (IPv4 and IPv6), interface choice (TCCL_SOCKET_IFNAME, NCCL syntax:
 * "eth" prefix, "=eth0" exact, "^docker" exclude; TCCL_SOCKET_FAMILY=AF_INET|AF_INET6), and a
 * small Socket class whose blocking send/recv of whole buffers honour a deadline, so no
 * bootstrap step can hang forever.
 *
 * Invariants: a Socket owns its fd and closes it once; every blocking call takes a deadline
 * and returns tcclSystemError naming the peer when it passes; a peer that closes gives
 * tcclRemoteError.
 *
 * NCCL counterpart: src/include/socket.h, src/misc/socket.cc (ncclSocket*, ncclFindInterfaces).
 * Added in: foundation (common/).
 */
#ifndef TCCL_COMMON_SOCKET_H_
#define TCCL_COMMON_SOCKET_H_

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tccl/result.h"

namespace tccl {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// A deadline `seconds` from now (seconds <= 0: effectively never).
Deadline deadlineIn(double seconds);

/// An IPv4 or IPv6 socket address. Trivially copyable; fits in a unique id.
struct SocketAddress {
  sockaddr_storage storage{};
  uint32_t len = 0;  // 0: unset

  bool valid() const { return len != 0; }
  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  /// "1.2.3.4:5678" or "[fe80::1]:5678".
  std::string toString() const;
  /// Parses "host:port", "[v6addr]:port" or "v6addr" plus port; resolves host names.
  static tcclResult_t parse(const std::string& text, SocketAddress* out);
};

/// Picks the address to listen on: TCCL_SOCKET_IFNAME / TCCL_SOCKET_FAMILY first, else the
/// first non-loopback interface that is up, else loopback. Logs the choice under INIT.
tcclResult_t findInterfaceAddress(SocketAddress* out);

/// An owned TCP socket.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept { *this = std::move(o); }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  /// Releases ownership of the fd (bytes read ahead, if any, stay behind: release only a
  /// socket that never read ahead).
  int release() { int f = fd_; fd_ = -1; return f; }

  /// Binds and listens on `addr` (port 0: any free port); `bound` gets the real address.
  tcclResult_t listen(const SocketAddress& addr, SocketAddress* bound, int backlog = 128);
  /// Accepts one connection before `deadline`.
  tcclResult_t accept(Socket* out, Deadline deadline);
  /// Connects to `addr`, retrying refused connections until `deadline` (the peer may not be
  /// listening yet) -- or until *interrupt (when given) moves: the communicator was aborted,
  /// and a peer that refuses is most likely gone (tcclRemoteError).
  tcclResult_t connect(const SocketAddress& addr, Deadline deadline,
                       const std::atomic<uint32_t>* interrupt = nullptr);

  /// Sends/receives exactly `size` bytes, or fails at `deadline` / on a closed peer.
  tcclResult_t sendAll(const void* data, size_t size, Deadline deadline);
  tcclResult_t recvAll(void* data, size_t size, Deadline deadline);

  /// Non-blocking progress used by the proxy: moves as many bytes as the kernel takes now.
  /// Returns tcclSuccess and adds to *done (possibly 0); tcclRemoteError on a closed peer.
  tcclResult_t trySend(const void* data, size_t size, size_t* done);
  tcclResult_t tryRecv(void* data, size_t size, size_t* done);
  /// trySend of two pieces as one stream (sendmsg with two iovecs): a small header and the
  /// data behind it leave in one system call and, under TCP_NODELAY, in one segment.
  tcclResult_t trySend2(const void* a, size_t aSize, const void* b, size_t bSize, size_t* done);

  /// Read-ahead: from now on a tryRecv that wants fewer than `bytes` asks the kernel for
  /// `bytes`, and the next reads are served from what came along first. The socket transport
  /// turns it on for the socket that carries its headers: a small message then arrives with
  /// its header in one recv() instead of two (Open MPI's TCP BTL reads a whole fragment the
  /// same way). 0 turns it off. Refused (false) while bytes wait in it: they belong to the
  /// stream. recvAll drains it too; close() empties it.
  bool setReadAhead(size_t bytes);
  /// Bytes read from the kernel that no read has taken yet.
  size_t readAheadBytes() const { return aheadEnd_ - aheadBegin_; }

  tcclResult_t setNonBlocking(bool on);
  /// TCP_NODELAY and large kernel buffers, for data sockets.
  void tuneForData(int bufferBytes);
  /// For a socket that only receives: acknowledge lazily (TCP_QUICKACK off, which puts Linux's
  /// delayed-ACK logic in its "ping-pong" mode). Otherwise every small segment read costs a
  /// pure ACK segment of its own, sent from inside recv() and processed by the peer's stack:
  /// 1.7 us of a 6.3 us exchange of 16 bytes each way over two one-way loopback sockets
  /// (MPI's single two-way socket carries its ACKs on the reply). Linux leaves the mode when a
  /// delayed ACK times out (an idle stream), so from then on the read that ends a pause of
  /// 20 ms or more sets it again.
  void delayAcks();
  const SocketAddress& peer() const { return peer_; }

 private:
  /// One recv() of at most `size` bytes, past the read-ahead (tryRecv's contract).
  tcclResult_t recvSome(void* data, size_t size, size_t* done);
  /// Moves up to `size` read-ahead bytes to `data`; returns how many.
  size_t takeReadAhead(void* data, size_t size);

  int fd_ = -1;
  SocketAddress peer_;
  std::unique_ptr<char[]> ahead_;  // the read-ahead buffer, aheadCap_ bytes (null: off)
  size_t aheadCap_ = 0;
  size_t aheadBegin_ = 0;  // [aheadBegin_, aheadEnd_): read from the kernel, not yet taken
  size_t aheadEnd_ = 0;
  bool lazyAcks_ = false;    // delayAcks() was called: keep the socket in that mode
  uint64_t lastReadNs_ = 0;  // when a read last brought bytes (coarse clock; lazyAcks_ only)
};

/// A 64-bit hash identifying this host: host name plus boot id, or TCCL_HOSTID when set
/// (which lets tests treat network namespaces on one machine as separate hosts).
uint64_t getHostHash();
/// This machine's host name (no domain), for log prefixes and TCCL_DEBUG_FILE's %h.
const char* getHostName();
/// A cryptographically random 64-bit value (getrandom), for secrets.
uint64_t randomU64();

}  // namespace tccl

#endif  // TCCL_COMMON_SOCKET_H_
