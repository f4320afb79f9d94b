/*
 * transport/socket/socket_transport.cc: setup, connect and proxy progress of the socket
 * transport. See socket_transport.h for the picture.
 *
 * Added in: stage 1.
 */
#include "transport/socket/socket_transport.h"

#include <algorithm>
#include <atomic>

#include "comm_context.h"
#include "trace.h"

// Sockets per connection (NCCL: NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS).
TCCL_PARAM(NSocksPerConn, "NSOCKS_PERCONN", 1)
// SO_SNDBUF/SO_RCVBUF for data sockets; 0 keeps the kernel's auto-tuning.
TCCL_PARAM(SocketBuffer, "SOCKET_BUFFER", 0)

namespace tccl {

namespace {

constexpr uint64_t kHelloMagic = 0x7cc15ec7700d0001ull;
// Below this many bytes per socket a step goes on socket 0 alone: splitting small steps only
// adds per-socket overhead.
constexpr int64_t kMinPartBytes = 64 << 10;

struct SocketResources : ConnectorResources {
  Socket listener;  // receive side, until connected
  Socket socks[kMaxSocketsPerConn];
  int nsocks = 1;
  // The step in flight: its size, the header bytes moved, and the bytes moved per socket.
  bool active = false;
  char* data = nullptr;  // the step's slot: where its bytes come from / go to
  int64_t size = 0;
  int64_t header = 0;
  size_t headerDone = 0;
  size_t done[kMaxSocketsPerConn] = {};
  uint64_t t0 = 0;  // step timeline: when this step started moving (set only when tracing)
};

SocketResources& res(Connector& c) { return static_cast<SocketResources&>(*c.resources); }
const SocketResources& res(const Connector& c) {
  return static_cast<const SocketResources&>(*c.resources);
}

/// TCCL_SOCKET_BUFFER, raised to kMinSocketBuffer. With smaller kernel buffers TCP stalls: the
/// sender fills its buffer, then waits for the receiver's delayed ACK (40 ms or more) before it
/// may send again, and a large exchange crawls (docs/knobs.md, TCCL_SOCKET_BUFFER, measures it).
constexpr int kMinSocketBuffer = 64 << 10;

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

/// Part `i` of a step of `size` bytes: [begin, end). Both sides compute it from the size in
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

tcclResult_t checkSocketConnectInfo(const SocketConnectInfo& info, uint64_t expectedStepBytes) {
  if (info.stepBytes != expectedStepBytes) {
    TCCL_WARN("socket transport: peer rank %d uses %lu-byte FIFO steps, we use %lu "
              "(TCCL_BUFFSIZE must be the same on every rank)",
              info.rank, (unsigned long)info.stepBytes, (unsigned long)expectedStepBytes);
    return tcclInvalidUsage;
  }
  if (info.nsocks < 1 || info.nsocks > kMaxSocketsPerConn) {
    TCCL_WARN("socket transport: peer asks for %d sockets per connection (1..%d)", info.nsocks,
              kMaxSocketsPerConn);
    return tcclRemoteError;
  }
  return tcclSuccess;
}

// ---- Send side ------------------------------------------------------------------------------

tcclResult_t SocketSendComm::setup(CommContext& comm, Connector& c, ConnectInfo* info) {
  TCCL_CHECK(allocConnectorFifo(comm, c));
  c.resources = std::make_unique<SocketResources>();
  SocketConnectInfo mine{};
  mine.stepBytes = c.conn->stepBytes;
  mine.nsocks = 0;  // the receiver decides
  mine.rank = comm.rank;
  packInfo(TransportId::kSocket, mine, info);
  return tcclSuccess;
}

tcclResult_t SocketSendComm::connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) {
  SocketConnectInfo peer;
  TCCL_CHECK(unpackInfo(TransportId::kSocket, peerInfo, &peer));
  TCCL_CHECK(checkSocketConnectInfo(peer, c.conn->stepBytes));
  SocketResources& r = res(c);
  r.nsocks = peer.nsocks;
  Deadline deadline = deadlineIn(bootstrapTimeoutSeconds());
  for (int i = 0; i < r.nsocks; i++) {
    TCCL_CHECK(r.socks[i].connect(peer.addr, deadline));
    // The hello proves we belong to this communicator and says which socket this is.
    SocketHello hello{kHelloMagic, comm.bootstrap->secret(), comm.rank, c.channel, i, 0};
    TCCL_CHECK(r.socks[i].sendAll(&hello, sizeof(hello), deadline));
    r.socks[i].tuneForData(socketBufferBytes());
    TCCL_CHECK(r.socks[i].setNonBlocking(true));
  }
  TCCL_INFO(kNet, "channel %d: rank %d -> rank %d via NET/Socket, %d socket(s) to %s", c.channel,
            comm.rank, c.peer, r.nsocks, peer.addr.toString().c_str());
  return tcclSuccess;
}

void SocketSendComm::free(Connector& c) {
  c.resources.reset();  // closes the sockets
  freeConnectorFifo(c);
}

tcclResult_t SocketSendComm::progress(CommContext& comm, Connector& c, bool* didWork) {
  SocketResources& r = res(c);
  ConnFifo* fifo = c.conn->fifo;
  for (;;) {
    // Only the proxy writes head on this side, so a plain read of it is current.
    const uint64_t step = fifo->head;
    if (!r.active) {
      // Acquire: the slot bytes and size the executor wrote before tail are visible.
      if (loadAcquire(&fifo->tail) <= step) return tcclSuccess;  // nothing published
      r.active = true;
      r.size = fifo->sizes[step % kNSteps];
      r.header = r.size;
      r.data = c.conn->buff + (step % kNSteps) * c.conn->stepBytes;
      r.headerDone = 0;
      std::fill(r.done, r.done + kMaxSocketsPerConn, 0);
      if (comm.tracePid >= 0) r.t0 = traceNowNs();
    }
    const char* slot = r.data;
    bool complete = true;
    // Socket 0: the 8-byte size header first, then its part of the data, in one gathered
    // send: under TCP_NODELAY a header sent alone would be a segment of its own, and would
    // wake the receiver for 8 bytes, on every step.
    if (r.headerDone < sizeof(r.header)) {
      int64_t b, e;
      partRange(r.size, r.nsocks, 0, &b, &e);
      const size_t headerLeft = sizeof(r.header) - r.headerDone;
      size_t n = 0;
      TCCL_CHECK(r.socks[0].trySend2(reinterpret_cast<const char*>(&r.header) + r.headerDone,
                                     headerLeft, slot + b, size_t(e - b), &n));
      if (n) *didWork = true;
      const size_t h = std::min(n, headerLeft);
      r.headerDone += h;
      r.done[0] += n - h;  // what went beyond the header is socket 0's data
      if (r.headerDone < sizeof(r.header)) complete = false;
    }
    for (int i = 0; i < r.nsocks; i++) {
      if (i == 0 && r.headerDone < sizeof(r.header)) continue;
      int64_t b, e;
      partRange(r.size, r.nsocks, i, &b, &e);
      size_t want = size_t(e - b) - r.done[i];
      if (want == 0) continue;
      size_t n = 0;
      TCCL_CHECK(r.socks[i].trySend(slot + b + r.done[i], want, &n));
      r.done[i] += n;
      if (n) *didWork = true;
      if (n < want) complete = false;
    }
    if (!complete) return tcclSuccess;  // the kernel's socket buffer is full: come back later
    // The whole step is on the wire: free the slot for the executor (release: nothing of ours
    // reads the slot after this).
    r.active = false;
    traceProxyStep(comm, c.peer, c.channel, c.isSend, step, r.size, r.t0);
    storeRelease(&fifo->head, step + 1);
    *didWork = true;
  }
}

int SocketSendComm::pollFd(const Connector& c, short* events) const {
  // Sleep on "socket writable" only while a step is stuck half-sent.
  if (!res(c).active) return -1;
  *events = POLLOUT;
  return res(c).socks[0].fd();
}

// ---- Receive side ---------------------------------------------------------------------------

tcclResult_t SocketRecvComm::setup(CommContext& comm, Connector& c, ConnectInfo* info) {
  TCCL_CHECK(allocConnectorFifo(comm, c));
  auto r = std::make_unique<SocketResources>();
  r->nsocks = int(std::clamp<int64_t>(tcclParamNSocksPerConn(), 1, kMaxSocketsPerConn));
  // Listen on the interface the bootstrap chose (TCCL_SOCKET_IFNAME), on any free port.
  SocketAddress addr = comm.bootstrap->localAddress();
  addr.setPort(0);
  SocketConnectInfo mine{};
  TCCL_CHECK(r->listener.listen(addr, &mine.addr, kMaxSocketsPerConn));
  mine.stepBytes = c.conn->stepBytes;
  mine.nsocks = r->nsocks;
  mine.rank = comm.rank;
  c.resources = std::move(r);
  packInfo(TransportId::kSocket, mine, info);
  return tcclSuccess;
}

tcclResult_t SocketRecvComm::connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) {
  SocketConnectInfo peer;
  TCCL_CHECK(unpackInfo(TransportId::kSocket, peerInfo, &peer));
  TCCL_CHECK(checkSocketConnectInfo(SocketConnectInfo{peer.addr, peer.stepBytes, 1, peer.rank},
                                    c.conn->stepBytes));
  SocketResources& r = res(c);
  Deadline deadline = deadlineIn(bootstrapTimeoutSeconds());
  int accepted = 0;
  while (accepted < r.nsocks) {
    Socket s;
    TCCL_CHECK(r.listener.accept(&s, deadline));
    SocketHello hello;
    if (s.recvAll(&hello, sizeof(hello), deadline) != tcclSuccess) continue;
    // Refuse anything that is not our peer's socket for this channel: a stray or hostile
    // connection is dropped and we keep waiting for the real one.
    if (hello.magic != kHelloMagic || hello.secret != comm.bootstrap->secret() ||
        hello.rank != c.peer || hello.channel != c.channel || hello.sockIndex < 0 ||
        hello.sockIndex >= r.nsocks || r.socks[hello.sockIndex].valid()) {
      TCCL_WARN("socket transport: refused a connection from %s (bad hello)",
                s.peer().toString().c_str());
      continue;
    }
    s.tuneForData(socketBufferBytes());
    TCCL_CHECK(s.setNonBlocking(true));
    r.socks[hello.sockIndex] = std::move(s);
    accepted++;
  }
  r.listener.close();
  TCCL_INFO(kNet, "channel %d: rank %d <- rank %d via NET/Socket, %d socket(s)", c.channel,
            comm.rank, c.peer, r.nsocks);
  return tcclSuccess;
}

void SocketRecvComm::free(Connector& c) {
  c.resources.reset();
  freeConnectorFifo(c);
}

tcclResult_t SocketRecvComm::progress(CommContext& comm, Connector& c, bool* didWork) {
  SocketResources& r = res(c);
  ConnFifo* fifo = c.conn->fifo;
  if (fifo->closed) return tcclSuccess;
  for (;;) {
    // Only the proxy writes tail on this side.
    const uint64_t step = fifo->tail;
    if (!r.active) {
      // A slot is free when the executor has consumed it: tail < head + kNSteps. Acquire:
      // the executor finished reading the slot before it moved head.
      if (step >= loadAcquire(&fifo->head) + kNSteps) return tcclSuccess;
      r.active = true;
      r.headerDone = 0;
      std::fill(r.done, r.done + kMaxSocketsPerConn, 0);
    }
    if (r.headerDone < sizeof(r.header)) {
      size_t n = 0;
      tcclResult_t rc = r.socks[0].tryRecv(reinterpret_cast<char*>(&r.header) + r.headerDone,
                                           sizeof(r.header) - r.headerDone, &n);
      if (rc == tcclRemoteError && r.headerDone == 0) {
        // A clean close between steps: the peer is done with this connection (it may simply
        // have destroyed its communicator). Only a consumer that still waits for data fails.
        TCCL_INFO(kNet, "rank %d closed its connection to us (channel %d)", c.peer, c.channel);
        __atomic_store_n(&fifo->closed, 1u, __ATOMIC_RELEASE);
        *didWork = true;
        return tcclSuccess;
      }
      TCCL_CHECK(rc);
      // The step's first bytes arrived: it starts here on the timeline.
      if (r.headerDone == 0 && n > 0 && comm.tracePid >= 0) r.t0 = traceNowNs();
      r.headerDone += n;
      if (n) *didWork = true;
      if (r.headerDone < sizeof(r.header)) return tcclSuccess;
      // Validate before trusting it with memory: a size outside the slot is a protocol error.
      if (r.header < 0 || uint64_t(r.header) > c.conn->stepBytes) {
        TCCL_WARN("socket transport: rank %d sent a step of %ld bytes (slot is %lu)", c.peer,
                  (long)r.header, (unsigned long)c.conn->stepBytes);
        return tcclRemoteError;
      }
      r.size = r.header;
      r.data = c.conn->buff + (step % kNSteps) * c.conn->stepBytes;
    }
    // >>> exercise 1.3: the socket proxy receives a step
    char* slot = r.data;
    bool complete = true;
    for (int i = 0; i < r.nsocks; i++) {
      int64_t b, e;
      partRange(r.size, r.nsocks, i, &b, &e);
      size_t want = size_t(e - b) - r.done[i];
      if (want == 0) continue;
      size_t n = 0;
      TCCL_CHECK(r.socks[i].tryRecv(slot + b + r.done[i], want, &n));
      r.done[i] += n;
      if (n) *didWork = true;
      if (n < want) complete = false;
    }
    if (!complete) return tcclSuccess;
    // Publish the step: size first, then tail with release so the executor sees both the
    // bytes and the size once it sees the new tail.
    fifo->sizes[step % kNSteps] = r.size;
    r.active = false;
    // Before tail: the consumer sees it later.
    traceProxyStep(comm, c.peer, c.channel, c.isSend, step, r.size, r.t0);
    storeRelease(&fifo->tail, step + 1);
    *didWork = true;
    // <<< exercise 1.3
  }
}

int SocketRecvComm::pollFd(const Connector& c, short* events) const {
  const ConnFifo* fifo = c.conn->fifo;
  if (fifo->closed) return -1;
  // Sleep on "readable" only when there is a free slot to read into (or a step in flight);
  // a full FIFO waits for the executor, which kicks us.
  bool room = res(c).active || fifo->tail < loadAcquire(&fifo->head) + kNSteps;
  if (!room) return -1;
  const SocketResources& r = res(c);
  *events = POLLIN;
  // Wait on the socket that still owes bytes: socket 0 for the header.
  for (int i = 0; r.active && r.headerDone == sizeof(r.header) && i < r.nsocks; i++) {
    int64_t b, e;
    partRange(r.size, r.nsocks, i, &b, &e);
    if (r.done[i] < size_t(e - b)) return r.socks[i].fd();
  }
  return r.socks[0].fd();
}

}  // namespace tccl
