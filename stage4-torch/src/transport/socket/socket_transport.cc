/*
 * transport/socket/socket_transport.cc: setup, connect and proxy progress of the socket
 * transport. See socket_transport.h for the picture.
 *
 * Added in: stage 1; the host fast path (receiveDestination, the read-ahead) in stage 3.
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
  char* data = nullptr;  // where the step's bytes come from / go to (slot, or a user buffer)
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

/// The read-ahead of a receiving connection's first socket (Socket::setReadAhead): steps up to
/// about this size arrive in one system call with their header.
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



/// Whether nobody has decided yet where step `step` goes: the communicator has no GPU (so the
/// consumer is a host executor, now or at its next call) and that consumer has neither offered
/// a buffer nor allowed staging for the step (fifo.h). It decides when its receive starts.
bool undecided(const CommContext& comm, const ConnFifo* fifo, uint64_t step) {
  return comm.cudaDev < 0 &&
         __atomic_load_n(&fifo->claims[step % kNSteps], __ATOMIC_ACQUIRE) !=
             claimValue(step, kClaimByConsumer) &&
         step >= __atomic_load_n(&fifo->staged, __ATOMIC_ACQUIRE);
}

/// Direct receive, proxy side: decides where step `step`'s bytes go. The consumer may have
/// offered a user buffer for it (claims[slot] says so); otherwise we claim the step for the
/// staging slot, and one compare-and-swap settles a race with a consumer offering right now.
/// Returns null when the step must wait in the socket: the communicator has no GPU (so the
/// consumer is a host executor, now or at its next call) and the consumer has neither offered
/// a buffer nor allowed staging for it yet (fifo.h). It decides when its receive starts.
char* receiveDestination(CommContext& comm, Connector& c, uint64_t step, int64_t size) {
  ConnFifo* fifo = c.conn->fifo;
  const int slot = int(step % kNSteps);
  char* staging = c.conn->buff + slot * c.conn->stepBytes;
  // A kernel never offers nor allows: on a communicator with a GPU, where the next consumer
  // may be a kernel, nothing is undecided and we stage every step.
  if (undecided(comm, fifo, step)) return nullptr;  // leave the bytes in the socket for now
  uint64_t seen = __atomic_load_n(&fifo->claims[slot], __ATOMIC_ACQUIRE);
  if (seen != claimValue(step, kClaimByConsumer)) {
    if (__atomic_compare_exchange_n(&fifo->claims[slot], &seen, claimValue(step, kClaimByProxy),
                                    false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      return staging;  // ours: the consumer will copy out of the slot
    }
  }
  // The consumer's claim (acquire: its ptrs/ptrSizes are visible). A step larger than the
  // offered buffer must not spill into user memory: stage it, and the consumer's size check
  // reports the mismatch.
  return size <= fifo->ptrSizes[slot] ? fifo->ptrs[slot] : staging;
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
  c.conn->direct = 1;  // the proxy can read any host memory: host executors may lend buffers
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
      // Direct mode: the executor lent us its user buffer instead of filling the slot.
      char* lent = fifo->ptrs[step % kNSteps];
      r.data = lent ? lent : c.conn->buff + (step % kNSteps) * c.conn->stepBytes;
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
  c.conn->direct = 1;  // the proxy can write any host memory: host executors may offer buffers
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
    s.delayAcks();  // stage 3: this socket only receives (Socket::delayAcks says why)
    TCCL_CHECK(s.setNonBlocking(true));
    r.socks[hello.sockIndex] = std::move(s);
    accepted++;
  }
  r.listener.close();
  // Socket 0 carries every step's header: reading ahead there brings a small step's bytes in
  // with its header, one recv() instead of two (chapter 3, "The read-ahead").
  r.socks[0].setReadAhead(kHeaderReadAhead);
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
  bool published = false;  // a step completed in this pass
  for (;;) {
    // Only the proxy writes tail on this side.
    const uint64_t step = fifo->tail;
    if (!r.active) {
      // A slot is free when the executor has consumed it: tail < head + kNSteps. Acquire:
      // the executor finished reading the slot before it moved head.
      if (step >= loadAcquire(&fifo->head) + kNSteps) return tcclSuccess;
      // Stage 3: a step just published, and nobody wants the next one yet: leave it for a
      // later pass. Looking for it now costs a recv() that almost always finds nothing (the
      // peer's next step is a call away), on the path from this call's receive to its return.
      // (A later pass reads its header, and waits for the decision: receiveDestination.)
      // The step's first bytes may already sit in socks[0]'s read-ahead, where the engine's
      // poll() on the socket cannot see them. Nothing is stranded: the step waits for the
      // consumer's decision anyway, and a consumer that decides then waits (waitAtLeast),
      // which kicks the engine out of poll() and runs passes itself; the next pass takes the
      // bytes from the read-ahead.
      if (published && undecided(comm, fifo, step)) return tcclSuccess;
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
      r.data = nullptr;
    }
    if (r.data == nullptr) {
      // Where the bytes go; null while the consumer has not decided (see receiveDestination).
      r.data = receiveDestination(comm, c, step, r.size);
      if (r.data == nullptr) return tcclSuccess;
      *didWork = true;
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
    published = true;
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
  // A step waiting for the consumer's decision: its socket is readable, but that is not news.
  // The consumer kicks when it decides.
  if (r.active && r.headerDone == sizeof(r.header) && r.data == nullptr) return -1;
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
