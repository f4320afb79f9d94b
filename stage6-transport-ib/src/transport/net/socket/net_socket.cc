/*
 * transport/net/socket/net_socket.cc: the socket Net. See net_socket.h for the picture.
 *
 * Added in: stage 6 (the send and receive loops: stage 1's socket transport).
 */
#include "transport/net/socket/net_socket.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "tccl/common/bootstrap.h"

// Sockets per connection (NCCL: NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS).
TCCL_PARAM(NSocksPerConn, "NSOCKS_PERCONN", 1)
// SO_SNDBUF/SO_RCVBUF for data sockets; 0 keeps the kernel's auto-tuning.
TCCL_PARAM(SocketBuffer, "SOCKET_BUFFER", 0)

namespace tccl {

namespace {

constexpr uint64_t kHelloMagic = 0x7cc15ec7700d0001ull;
// Below this many bytes per socket a message goes on socket 0 alone: splitting small messages
// only adds per-socket overhead.
constexpr int64_t kMinPartBytes = 64 << 10;
// Requests in flight per comm (the transport keeps at most a FIFO's worth, kNSteps).
constexpr int kMaxRequests = 32;

/// A hello: the first bytes on every data socket.
struct SocketHello {
  uint64_t magic;
  uint64_t token;
  int32_t sockIndex;
  int32_t pad;
};

/// TCCL_SOCKET_BUFFER, raised to kMinSocketBuffer. With smaller kernel buffers TCP stalls: the
/// sender fills its buffer, then waits for the receiver's delayed ACK (40 ms or more) before it
/// may send again, and a large exchange crawls (docs/knobs.md, TCCL_SOCKET_BUFFER, measures it).
constexpr int kMinSocketBuffer = 64 << 10;

/// The read-ahead of a receiving connection's first socket (Socket::setReadAhead): messages up
/// to about this size arrive in one system call with their header.
constexpr size_t kHeaderReadAhead = 4096;

int socketBufferBytes() {
  const int64_t v = tcclParamSocketBuffer();
  if (v <= 0 || v >= kMinSocketBuffer) return int(std::min<int64_t>(v, 1 << 30));
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) {
    TCCL_WARN("TCCL_SOCKET_BUFFER=%ld is too small (TCP would stall on delayed ACKs): using %d",
              (long)v, kMinSocketBuffer);
  }
  return kMinSocketBuffer;
}

/// Part `i` of a message of `size` bytes: [begin, end). Both sides compute it from the size in
/// the header, so no layout travels on the wire.
void partRange(int64_t size, int nsocks, int i, int64_t* begin, int64_t* end) {
  if (size < nsocks * kMinPartBytes) nsocks = 1;
  if (i >= nsocks) {
    *begin = *end = 0;
    return;
  }
  *begin = size * i / nsocks;
  *end = size * (i + 1) / nsocks;
}

}  // namespace

tcclResult_t netListenAddress(SocketAddress* out) {
  static std::mutex mutex;
  static SocketAddress addr;
  std::lock_guard<std::mutex> lock(mutex);
  if (!addr.valid()) TCCL_CHECK(findInterfaceAddress(&addr));
  *out = addr;
  return tcclSuccess;
}

// ---- The Net's objects ------------------------------------------------------------------------

// This Net's objects derive from net.h's opaque handles under names of their own: two Nets
// defining net.h's names themselves, with different layouts, broke the one-definition rule
// (at -Og one std::make_unique<NetSendComm> served both, and IbNet::connect built a socket's).
struct SocketConn;

struct SockRequest : NetRequest {
  SocketConn* conn = nullptr;
  bool used = false;
  bool complete = false;
  char* data = nullptr;
  int64_t capacity = 0;  // send: the message's size; receive: the bytes posted for
  int64_t header = 0;    // the size header: sent, or read
  size_t headerDone = 0;
  size_t done[kMaxSocketsPerConn] = {};
  bool drop = false;     // receive: larger than posted: read and dropped (net.h)
  bool closed = false;   // receive: the peer closed cleanly instead (kNetClosed)
};

/// One connection, either direction: its sockets and its requests, worked on in order.
struct SocketConn {
  bool isSend = false;
  Socket socks[kMaxSocketsPerConn];
  int nsocks = 1;
  SockRequest reqs[kMaxRequests];
  uint64_t posted = 0;  // requests made
  uint64_t worked = 0;  // requests complete (all of [0, worked) are)
};

struct SockSendComm : NetSendComm, SocketConn {};
struct SockRecvComm : NetRecvComm, SocketConn {};

struct SockListenComm : NetListenComm {
  Socket listener;
  uint64_t token = 0;
  int nsocks = 1;
};

namespace {

/// Moves request `r` (a send) on: the 8-byte size header and socket 0's part in one gathered
/// send (under TCP_NODELAY a header sent alone would be a segment of its own, and would wake
/// the receiver for 8 bytes, on every message), then the other sockets' parts.
tcclResult_t progressSend(SocketConn& c, SockRequest& r, bool* complete) {
  *complete = false;
  const int64_t size = r.header;
  if (r.headerDone < sizeof(r.header)) {
    int64_t b, e;
    partRange(size, c.nsocks, 0, &b, &e);
    const size_t headerLeft = sizeof(r.header) - r.headerDone;
    size_t n = 0;
    TCCL_CHECK(c.socks[0].trySend2(reinterpret_cast<const char*>(&r.header) + r.headerDone,
                                   headerLeft, r.data + b, size_t(e - b), &n));
    const size_t h = std::min(n, headerLeft);
    r.headerDone += h;
    r.done[0] += n - h;  // what went beyond the header is socket 0's data
    if (r.headerDone < sizeof(r.header)) return tcclSuccess;
  }
  bool all = true;
  for (int i = 0; i < c.nsocks; i++) {
    int64_t b, e;
    partRange(size, c.nsocks, i, &b, &e);
    const size_t want = size_t(e - b) - r.done[i];
    if (want == 0) continue;
    size_t n = 0;
    TCCL_CHECK(c.socks[i].trySend(r.data + b + r.done[i], want, &n));
    r.done[i] += n;
    if (n < want) all = false;  // the kernel's socket buffer is full: come back later
  }
  *complete = all;
  return tcclSuccess;
}

/// Moves request `r` (a receive) on: the header from socket 0 (checked before any byte moves
/// to memory), then each socket's part, into the posted buffer or, for a message larger than
/// it, nowhere.
tcclResult_t progressRecv(SocketConn& c, SockRequest& r, bool* complete) {
  *complete = false;
  if (r.headerDone < sizeof(r.header)) {
    size_t n = 0;
    tcclResult_t rc = c.socks[0].tryRecv(reinterpret_cast<char*>(&r.header) + r.headerDone,
                                         sizeof(r.header) - r.headerDone, &n);
    if (rc == tcclRemoteError && r.headerDone == 0) {
      // A clean close between messages: the peer is done with this connection (it may simply
      // have destroyed its communicator). Only a receiver that still waits for data fails.
      r.closed = true;
      *complete = true;
      return tcclSuccess;
    }
    TCCL_CHECK(rc);
    r.headerDone += n;
    if (r.headerDone < sizeof(r.header)) return tcclSuccess;
    if (r.header < 0 || r.header > kMaxSocketMessage) {
      TCCL_WARN("NET/Socket: the peer sent a message header of %ld bytes", (long)r.header);
      return tcclRemoteError;
    }
    r.drop = r.header > r.capacity;
  }
  bool all = true;
  for (int i = 0; i < c.nsocks; i++) {
    int64_t b, e;
    partRange(r.header, c.nsocks, i, &b, &e);
    size_t want = size_t(e - b) - r.done[i];
    if (want == 0) continue;
    size_t n = 0;
    if (r.drop) {
      static thread_local char sink[64 << 10];
      want = std::min(want, sizeof(sink));
      TCCL_CHECK(c.socks[i].tryRecv(sink, want, &n));
    } else {
      TCCL_CHECK(c.socks[i].tryRecv(r.data + b + r.done[i], want, &n));
    }
    r.done[i] += n;
    if (r.done[i] < size_t(e - b)) all = false;
  }
  *complete = all;
  return tcclSuccess;
}

/// Works on the connection's requests in order, as far as they go without blocking.
tcclResult_t progressConn(SocketConn& c) {
  while (c.worked < c.posted) {
    SockRequest& r = c.reqs[c.worked % kMaxRequests];
    bool complete = false;
    TCCL_CHECK(c.isSend ? progressSend(c, r, &complete) : progressRecv(c, r, &complete));
    if (!complete) break;
    r.complete = true;
    c.worked++;
  }
  return tcclSuccess;
}

/// A free request at the end of the connection's queue, or null when all are in flight.
SockRequest* newRequest(SocketConn& c) {
  SockRequest& r = c.reqs[c.posted % kMaxRequests];
  if (r.used) return nullptr;
  r = SockRequest{};
  r.conn = &c;
  r.used = true;
  c.posted++;
  return &r;
}

}  // namespace

tcclResult_t checkSocketNetHandle(const SocketNetHandle& h) {
  if (h.magic != kSocketNetHandleMagic) {
    TCCL_WARN("NET/Socket: the peer's connection handle is not a socket handle");
    return tcclRemoteError;
  }
  if (h.nsocks < 1 || h.nsocks > kMaxSocketsPerConn) {
    TCCL_WARN("NET/Socket: the peer asks for %d sockets per connection (1..%d)", h.nsocks,
              kMaxSocketsPerConn);
    return tcclRemoteError;
  }
  if (!h.addr.valid() || h.addr.len > sizeof(h.addr.storage)) {
    TCCL_WARN("NET/Socket: the peer's handle holds no valid address");
    return tcclRemoteError;
  }
  return tcclSuccess;
}

tcclResult_t SocketNet::getProperties(int dev, NetProperties* props) const {
  TCCL_ARG_CHECK(dev == 0, "NET/Socket: no device %d", dev);
  *props = NetProperties{};
  SocketAddress addr;
  TCCL_CHECK(netListenAddress(&addr));
  snprintf(props->name, sizeof(props->name), "%s", addr.toString().c_str());
  props->speedMbps = 0;  // unknown
  props->anyHostMemory = true;
  return tcclSuccess;
}

tcclResult_t SocketNet::listen(int dev, NetHandle* handle, NetListenComm** listenComm) {
  TCCL_ARG_CHECK(dev == 0, "NET/Socket: no device %d", dev);
  auto l = std::make_unique<SockListenComm>();
  SocketAddress addr;
  TCCL_CHECK(netListenAddress(&addr));
  addr.setPort(0);  // any free port
  SocketNetHandle h{};
  h.magic = kSocketNetHandleMagic;
  h.token = randomU64();
  h.nsocks = int(std::clamp<int64_t>(tcclParamNSocksPerConn(), 1, kMaxSocketsPerConn));
  TCCL_CHECK(l->listener.listen(addr, &h.addr, kMaxSocketsPerConn));
  l->token = h.token;
  l->nsocks = h.nsocks;
  memset(handle, 0, sizeof(*handle));
  memcpy(handle->bytes, &h, sizeof(h));
  *listenComm = l.release();
  return tcclSuccess;
}

tcclResult_t SocketNet::connect(int dev, NetHandle* handle, NetSendComm** sendComm) {
  *sendComm = nullptr;
  SocketNetHandle h;
  memcpy(&h, handle->bytes, sizeof(h));
  TCCL_CHECK(checkSocketNetHandle(h));
  auto c = std::make_unique<SockSendComm>();
  c->isSend = true;
  c->nsocks = h.nsocks;
  // Never waits for the receiver: TCP completes the connection from the listen backlog, and
  // the hello fits in the socket buffer. So connect is done at once, on every rank, before any
  // accept (transport.cc's phases rely on that for the socket Net).
  Deadline deadline = deadlineIn(bootstrapTimeoutSeconds());
  for (int i = 0; i < c->nsocks; i++) {
    TCCL_CHECK(c->socks[i].connect(h.addr, deadline));
    SocketHello hello{kHelloMagic, h.token, i, 0};
    TCCL_CHECK(c->socks[i].sendAll(&hello, sizeof(hello), deadline));
    c->socks[i].tuneForData(socketBufferBytes());
    TCCL_CHECK(c->socks[i].setNonBlocking(true));
  }
  TCCL_INFO(kNet, "NET/Socket: connected %d socket(s) to %s", c->nsocks,
            h.addr.toString().c_str());
  *sendComm = c.release();
  return tcclSuccess;
}

tcclResult_t SocketNet::accept(NetListenComm* listenComm, NetRecvComm** recvComm) {
  *recvComm = nullptr;
  auto* l = static_cast<SockListenComm*>(listenComm);
  auto c = std::make_unique<SockRecvComm>();
  c->nsocks = l->nsocks;
  // The sender connected before anyone accepts (connect above), so this waits only for a
  // slow peer, at most the bootstrap timeout.
  Deadline deadline = deadlineIn(bootstrapTimeoutSeconds());
  int accepted = 0;
  while (accepted < c->nsocks) {
    Socket s;
    TCCL_CHECK(l->listener.accept(&s, deadline));
    SocketHello hello;
    if (s.recvAll(&hello, sizeof(hello), deadline) != tcclSuccess) continue;
    // Refuse anything that is not our sender's socket: a stray or hostile connection is
    // dropped and we keep waiting for the real one.
    if (hello.magic != kHelloMagic || hello.token != l->token || hello.sockIndex < 0 ||
        hello.sockIndex >= c->nsocks || c->socks[hello.sockIndex].valid()) {
      TCCL_WARN("NET/Socket: refused a connection from %s (bad hello)",
                s.peer().toString().c_str());
      continue;
    }
    s.tuneForData(socketBufferBytes());
    s.delayAcks();  // this socket only receives (Socket::delayAcks says why)
    TCCL_CHECK(s.setNonBlocking(true));
    c->socks[hello.sockIndex] = std::move(s);
    accepted++;
  }
  // Socket 0 carries every message's header: reading ahead there brings a small message's
  // bytes in with its header, one recv() instead of two (chapter 3, "The read-ahead").
  c->socks[0].setReadAhead(kHeaderReadAhead);
  *recvComm = c.release();
  return tcclSuccess;
}

tcclResult_t SocketNet::regMr(NetSendComm*, NetRecvComm*, void*, size_t, NetMemType type,
                              NetMr** mhandle) {
  // The kernel copies from and to any host memory: nothing to register. GPU memory it cannot
  // reach (the transport stages device data through host FIFOs).
  TCCL_ARG_CHECK(type == NetMemType::kHost, "NET/Socket: only host memory can be sent");
  *mhandle = nullptr;
  return tcclSuccess;
}

tcclResult_t SocketNet::isend(NetSendComm* comm, void* data, size_t size, NetMr*,
                              NetRequest** request) {
  SocketConn& c = *static_cast<SockSendComm*>(comm);
  SockRequest* r = newRequest(c);
  *request = r;
  if (r == nullptr) return tcclSuccess;  // all in flight: call again
  r->data = static_cast<char*>(data);
  r->capacity = r->header = int64_t(size);
  return progressConn(c);  // the bytes go out now if the socket takes them
}

tcclResult_t SocketNet::irecv(NetRecvComm* comm, void* data, size_t size, NetMr*,
                              NetRequest** request) {
  SockRequest* r = newRequest(*static_cast<SockRecvComm*>(comm));
  *request = r;
  if (r == nullptr) return tcclSuccess;
  r->data = static_cast<char*>(data);
  r->capacity = int64_t(size);
  return tcclSuccess;  // read in test(): the caller tests right away when it wants the bytes
}

tcclResult_t SocketNet::test(NetRequest* request, bool* done, size_t* size) {
  auto* r = static_cast<SockRequest*>(request);
  *done = false;
  if (!r->complete) TCCL_CHECK(progressConn(*r->conn));
  if (!r->complete) return tcclSuccess;
  *done = true;
  if (size) *size = r->closed ? kNetClosed : size_t(r->header);
  r->used = false;
  return tcclSuccess;
}

tcclResult_t SocketNet::closeSend(NetSendComm* comm) {
  delete static_cast<SockSendComm*>(comm);  // closes the sockets: the receiver sees a clean close between messages
  return tcclSuccess;
}

tcclResult_t SocketNet::closeRecv(NetRecvComm* comm) {
  delete static_cast<SockRecvComm*>(comm);
  return tcclSuccess;
}

tcclResult_t SocketNet::closeListen(NetListenComm* comm) {
  delete static_cast<SockListenComm*>(comm);
  return tcclSuccess;
}

int SocketNet::pollFd(const NetSendComm* sendComm, const NetRecvComm* recvComm,
                      short* events) const {
  const SocketConn& c = sendComm ? static_cast<const SocketConn&>(
                                     *static_cast<const SockSendComm*>(sendComm))
                                 : static_cast<const SocketConn&>(
                                     *static_cast<const SockRecvComm*>(recvComm));
  if (c.worked == c.posted) return -1;  // nothing in flight: nothing to wait for here
  // The oldest request is stuck (the others wait behind it): sleep on the socket that owes
  // bytes -- socket 0 for the header.
  const SockRequest& r = c.reqs[c.worked % kMaxRequests];
  *events = c.isSend ? POLLOUT : POLLIN;
  if (r.headerDone < sizeof(r.header)) return c.socks[0].fd();
  for (int i = 0; i < c.nsocks; i++) {
    int64_t b, e;
    partRange(r.header, c.nsocks, i, &b, &e);
    if (r.done[i] < size_t(e - b)) return c.socks[i].fd();
  }
  return c.socks[0].fd();
}

Net& socketNet() {
  static SocketNet net;
  return net;
}

}  // namespace tccl
