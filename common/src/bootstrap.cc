/*
 * common/src/bootstrap.cc: a rank's bootstrap endpoint (class Bootstrap).
 *
 * What it is: NCCL's bootstrap network. create() listens, checks in with the root, learns its
 * ring successor, and all-gathers every rank's listen address around the ring. After that any
 * rank can send a tagged message to any other.
 *
 * Design: each rank has a receiver thread that owns the listening socket and every incoming
 * connection. It reads headers and payloads without blocking (a small state machine per
 * connection, multiplexed with poll), validates each header before reading its payload, and
 * appends complete messages to the unexpected queue; recv() only waits on that queue. Why a
 * thread, where NCCL's recv accepts on the caller's thread: with receiving always in
 * progress, two ranks that send large messages to each other at the same moment cannot
 * deadlock on full socket buffers, and recv needs no socket code of its own.
 * Outgoing connections are opened on first use and kept, one per peer, so messages from one
 * sender reach the queue in the order they were sent: FIFO per (peer, tag) holds.
 *
 * Invariants:
 *  - A connection must open with a hello carrying the secret and a rank in range, within
 *    kHelloSeconds; every later header must repeat the secret and that rank. Otherwise: WARN,
 *    close the connection, nothing delivered.
 *  - A payload larger than kMaxBootstrapMessage is refused from the header alone (never
 *    allocated); a connection closed mid-message delivers nothing.
 *  - recv fails (and consumes the message) if the sender's size differs from the size asked.
 *  - No send, recv, barrier or all-gather step blocks past TCCL_BOOTSTRAP_TIMEOUT (waiting
 *    for the root's answer at check-in gets kRootGraceSeconds more: see checkIn).
 * Wire checks are in bootstrap_wire.cc, the root in bootstrap_root.cc.
 *
 * NCCL counterpart: src/bootstrap.cc (bootstrapInit, bootstrapSend/Recv, unexpected queue,
 * bootstrapAllGather, bootstrapBarrier).
 * Added in: foundation (common/).
 */
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include "bootstrap_internal.h"
#include "tccl/common/debug.h"

namespace tccl {

// ---- the endpoint ---------------------------------------------------------------------------

struct Bootstrap::Impl {
  struct Message {
    int peer;
    uint32_t type;
    uint32_t tag;
    std::vector<char> data;
  };
  // One accepted connection, as the receiver thread sees it.
  struct Incoming {
    Socket sock;
    int rank = -1;  // -1 until its hello arrived
    Deadline helloBy;
    BootstrapHeader header{};
    size_t headerGot = 0;
    bool inPayload = false;
    std::vector<char> payload;
    size_t payloadGot = 0;
  };

  int rank = 0, nranks = 0;
  uint64_t secret = 0;
  double timeout = 0;  // seconds, TCCL_BOOTSTRAP_TIMEOUT
  const std::atomic<uint32_t>* interrupt = nullptr;  // setInterrupt: ends waits when it moves
  Socket listener;
  SocketAddress listenAddr;
  std::vector<SocketAddress> peers;  // listen address of every rank
  std::vector<Socket> sendConns;     // outgoing, per peer; caller's thread only

  std::thread receiver;
  int wakeFd = -1;  // written by the destructor to stop the receiver
  std::mutex mu;    // guards queue and receiverDead
  std::condition_variable cv;
  std::deque<Message> queue;  // the unexpected queue
  bool receiverDead = false;

  ~Impl() {
    if (receiver.joinable()) {
      uint64_t one = 1;
      ssize_t ignored = ::write(wakeFd, &one, sizeof(one));
      (void)ignored;
      receiver.join();
    }
    if (wakeFd >= 0) ::close(wakeFd);
  }

  static const Impl* of(const Bootstrap& b) { return b.impl_.get(); }
  Deadline deadline() const { return deadlineIn(timeout); }

  tcclResult_t startReceiver() {
    wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    TCCL_SYS_CHECK(wakeFd, "eventfd");
    try {
      receiver = std::thread([this] { receiverLoop(); });
    } catch (const std::system_error& e) {
      TCCL_WARN("bootstrap: cannot start the receiver thread: %s", e.what());
      return tcclSystemError;
    }
    return tcclSuccess;
  }

  void receiverLoop();
  bool serve(Incoming& c);
  bool onHeader(Incoming& c);
  void deliver(Message m) {
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(m));
    }
    cv.notify_all();
  }

  tcclResult_t checkIn(const SocketAddress& root, SocketAddress* next);
  tcclResult_t sendMsg(int peer, uint32_t type, uint32_t tag, const void* data, size_t size);
  tcclResult_t recvMsg(int peer, uint32_t type, uint32_t tag, void* data, size_t size);
  tcclResult_t ringAllGather(void* data, size_t bytesPerRank);
};

SocketAddress bootstrapListenAddress(const Bootstrap& b) {
  return Bootstrap::Impl::of(b)->listenAddr;
}

// ---- receiving (the receiver thread) ----------------------------------------------------------

void Bootstrap::Impl::receiverLoop() {
  setLogRank(rank);
  std::vector<Incoming> conns;
  for (;;) {
    std::vector<pollfd> fds{{wakeFd, POLLIN, 0}, {listener.fd(), POLLIN, 0}};
    bool helloPending = false;
    for (auto& c : conns) {
      fds.push_back({c.sock.fd(), POLLIN, 0});
      helloPending = helloPending || c.rank < 0;
    }
    int rc = ::poll(fds.data(), fds.size(), helloPending ? 1000 : -1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 || (fds[1].revents & (POLLERR | POLLNVAL))) {
      TCCL_WARN("bootstrap: rank %d cannot receive any more: %s", rank,
                rc < 0 ? strerror(errno) : "listening socket failed");
      std::lock_guard<std::mutex> lock(mu);
      receiverDead = true;
      cv.notify_all();
      return;
    }
    if (fds[0].revents != 0) return;  // the destructor asked us to stop

    Clock::time_point now = Clock::now();
    std::vector<Incoming> keep;
    for (size_t i = 0; i < conns.size(); ++i) {
      Incoming& c = conns[i];
      bool alive = true;
      if (fds[i + 2].revents != 0) {
        alive = serve(c);
      } else if (c.rank < 0 && now >= c.helloBy) {
        TCCL_WARN("bootstrap: %s sent no hello within %.0f s; dropped",
                  c.sock.peer().toString().c_str(), kHelloSeconds);
        alive = false;
      }
      if (alive) keep.push_back(std::move(c));
    }
    conns = std::move(keep);
    if (fds[1].revents & POLLIN) {
      Incoming c;
      // poll said a connection is waiting, so this does not wait.
      if (listener.accept(&c.sock, deadlineIn(1.0)) == tcclSuccess) {
        c.helloBy = deadlineIn(kHelloSeconds);
        conns.push_back(std::move(c));
      } else {
        // Out of fds, say: the listener stays readable, so do not spin on it.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
}

// One non-blocking read on a readable connection. Returns false to drop the connection.
bool Bootstrap::Impl::serve(Incoming& c) {
  char* dst = c.inPayload ? c.payload.data() + c.payloadGot
                          : reinterpret_cast<char*>(&c.header) + c.headerGot;
  size_t want = c.inPayload ? c.payload.size() - c.payloadGot : sizeof(c.header) - c.headerGot;
  ssize_t n = ::recv(c.sock.fd(), dst, want, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
  if (n <= 0) {
    // Closing between messages is how a peer says goodbye; closing inside one is an error.
    if (n < 0 || c.inPayload || c.headerGot != 0)
      TCCL_WARN(
          "bootstrap: connection from %s (rank %d) %s in the middle of a message; "
          "the partial message is dropped",
          c.sock.peer().toString().c_str(), c.rank, n == 0 ? "closed" : strerror(errno));
    return false;
  }
  if (c.inPayload) {
    c.payloadGot += static_cast<size_t>(n);
    if (c.payloadGot == c.payload.size()) {
      c.inPayload = false;
      deliver(Message{c.rank, c.header.type, c.header.tag, std::move(c.payload)});
      c.payload = {};
    }
    return true;
  }
  c.headerGot += static_cast<size_t>(n);
  if (c.headerGot < sizeof(c.header)) return true;
  c.headerGot = 0;
  return onHeader(c);
}

// A complete header: judge it before any payload byte is read or allocated.
bool Bootstrap::Impl::onHeader(Incoming& c) {
  const BootstrapHeader& h = c.header;
  std::string from = c.sock.peer().toString();
  if (c.rank < 0) {
    if (checkBootstrapHeader(h, secret, nranks, 0) != tcclSuccess || h.type != kMsgHello) {
      TCCL_WARN("bootstrap: refused a connection from %s (invalid hello)", from.c_str());
      return false;
    }
    c.rank = h.rank;
    return true;
  }
  if (checkBootstrapHeader(h, secret, nranks, kMaxBootstrapMessage) != tcclSuccess ||
      !isBootstrapMessageType(h.type) || h.rank != c.rank) {
    TCCL_WARN(
        "bootstrap: invalid message header from %s (rank %d, type %u); connection "
        "dropped",
        from.c_str(), c.rank, h.type);
    return false;
  }
  try {
    c.payload.assign(h.size, 0);
  } catch (const std::bad_alloc&) {
    TCCL_WARN("bootstrap: cannot allocate %" PRIu64 " bytes for a message from rank %d", h.size,
              c.rank);
    return false;
  }
  c.payloadGot = 0;
  c.inPayload = h.size > 0;
  if (h.size == 0) deliver(Message{c.rank, h.type, h.tag, {}});
  return true;
}

tcclResult_t Bootstrap::Impl::recvMsg(int peer, uint32_t type, uint32_t tag, void* data,
                                      size_t size) {
  TCCL_ARG_CHECK(peer >= 0 && peer < nranks, "bootstrap recv: peer %d out of range [0, %d)", peer,
                 nranks);
  TCCL_ARG_CHECK(data != nullptr || size == 0, "bootstrap recv: null buffer");
  Deadline by = deadline();
  const uint32_t interruptsAtStart = interrupt != nullptr ? interrupt->load() : 0;
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (it->peer != peer || it->type != type || it->tag != tag) continue;
      Message m = std::move(*it);
      queue.erase(it);
      lock.unlock();
      if (m.data.size() != size) {
        TCCL_WARN("bootstrap: rank %d expected %zu bytes from rank %d (tag %u) but it sent %zu",
                  rank, size, peer, tag, m.data.size());
        return tcclInvalidUsage;
      }
      if (size > 0) memcpy(data, m.data.data(), size);
      return tcclSuccess;
    }
    if (receiverDead) {
      TCCL_WARN("bootstrap: rank %d can no longer receive (see the earlier warning)", rank);
      return tcclSystemError;
    }
    // With an interrupt counter, wake every 100 ms to look at it (nobody notifies the
    // condition variable when it moves).
    if (interrupt != nullptr && interrupt->load() != interruptsAtStart) {
      TCCL_WARN("bootstrap: rank %d stopped waiting for rank %d (tag %u): the communicator "
                "was aborted", rank, peer, tag);
      return tcclRemoteError;
    }
    const Deadline slice = Clock::now() + std::chrono::milliseconds(100);
    if (by == Deadline::max() && interrupt == nullptr) {
      cv.wait(lock);
    } else if (interrupt != nullptr && slice < by) {
      cv.wait_until(lock, slice);
    } else if (cv.wait_until(lock, by) == std::cv_status::timeout && Clock::now() >= by) {
      TCCL_WARN(
          "bootstrap: rank %d timed out after %.0f s waiting for a message from rank %d "
          "(tag %u)",
          rank, timeout, peer, tag);
      return tcclSystemError;
    }
  }
}

// ---- sending (the caller's thread) ------------------------------------------------------------

tcclResult_t Bootstrap::Impl::sendMsg(int peer, uint32_t type, uint32_t tag, const void* data,
                                      size_t size) {
  TCCL_ARG_CHECK(peer >= 0 && peer < nranks, "bootstrap send: peer %d out of range [0, %d)", peer,
                 nranks);
  TCCL_ARG_CHECK(data != nullptr || size == 0, "bootstrap send: null buffer");
  TCCL_ARG_CHECK(size <= kMaxBootstrapMessage,
                 "bootstrap send: %zu bytes exceed the bound of "
                 "%zu",
                 size, kMaxBootstrapMessage);
  if (peer == rank) {  // to self: straight into our own queue
    const char* p = static_cast<const char*>(data);
    deliver(Message{rank, type, tag, std::vector<char>(p, p + size)});
    return tcclSuccess;
  }
  Deadline by = deadline();
  Socket& s = sendConns[peer];
  tcclResult_t res = tcclSuccess;
  if (!s.valid()) {
    TCCL_ARG_CHECK(peers[peer].valid(), "bootstrap send: address of rank %d not known yet", peer);
    TCCL_CHECK(s.connect(peers[peer], by, interrupt));  // (an abort ends the retries too)
    BootstrapHeader hello = makeBootstrapHeader(kMsgHello, secret, rank, 0, 0);
    TCCL_CHECK_GOTO(s.sendAll(&hello, sizeof(hello), by), res, fail);
  }
  {
    BootstrapHeader h = makeBootstrapHeader(type, secret, rank, tag, size);
    TCCL_CHECK_GOTO(s.sendAll(&h, sizeof(h), by), res, fail);
    TCCL_CHECK_GOTO(s.sendAll(data, size, by), res, fail);
  }
  return tcclSuccess;
fail:
  TCCL_WARN("bootstrap: rank %d could not send %zu bytes to rank %d at %s", rank, size, peer,
            peers[peer].toString().c_str());
  s.close();  // the next send reconnects
  return res;
}

tcclResult_t Bootstrap::Impl::ringAllGather(void* data, size_t bytesPerRank) {
  char* base = static_cast<char*>(data);
  int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  // Step i: pass on the slot received in step i-1 (our own in step 0) and receive the slot
  // of the rank i+1 places behind us. After n-1 steps every slot has gone round.
  for (int i = 0; i < nranks - 1; ++i) {
    int sendSlot = (rank - i + nranks) % nranks;
    int recvSlot = (rank - i - 1 + nranks) % nranks;
    TCCL_CHECK(sendMsg(next, kMsgAllGather, 0, base + sendSlot * bytesPerRank, bytesPerRank));
    TCCL_CHECK(recvMsg(prev, kMsgAllGather, 0, base + recvSlot * bytesPerRank, bytesPerRank));
  }
  return tcclSuccess;
}

// ---- joining ----------------------------------------------------------------------------------

tcclResult_t Bootstrap::Impl::checkIn(const SocketAddress& rootAddr, SocketAddress* next) {
  std::string root = rootAddr.toString();
  Socket sock;
  if (sock.connect(rootAddr, deadline()) != tcclSuccess) {
    TCCL_WARN("bootstrap: rank %d could not reach the bootstrap root at %s within %.0f s", rank,
              root.c_str(), timeout);
    return tcclSystemError;
  }
  CheckinInfo info{nranks, 0, listenAddr};
  BootstrapHeader h =
      makeBootstrapHeader(kMsgCheckin, secret, rank, static_cast<uint32_t>(nranks), sizeof(info));
  TCCL_CHECK(sock.sendAll(&h, sizeof(h), deadline()));
  TCCL_CHECK(sock.sendAll(&info, sizeof(info), deadline()));
  // The root answers when all ranks are in, or with the list of missing ranks at its own
  // deadline, which started no later than our check-in: wait a little longer than it does.
  Deadline replyBy = timeout > 0 ? deadlineIn(timeout + kRootGraceSeconds) : Deadline::max();
  if (sock.recvAll(&h, sizeof(h), replyBy) != tcclSuccess) {
    TCCL_WARN("bootstrap: rank %d got no answer from the root at %s", rank, root.c_str());
    return tcclSystemError;
  }
  size_t bound = std::max(sizeof(SocketAddress), kMaxRootErrorText);
  TCCL_CHECK(checkBootstrapHeader(h, secret, 1, bound));
  if (h.type == kMsgRootError) {
    std::string text(h.size, '\0');
    TCCL_CHECK(sock.recvAll(&text[0], text.size(), replyBy));
    TCCL_WARN("bootstrap: rank %d: the root at %s reports: %s", rank, root.c_str(), text.c_str());
    return tcclSystemError;
  }
  if (h.type != kMsgRootPeer || h.size != sizeof(SocketAddress)) {
    TCCL_WARN("bootstrap: rank %d: unexpected answer (type %u) from the root at %s", rank, h.type,
              root.c_str());
    return tcclRemoteError;
  }
  TCCL_CHECK(sock.recvAll(next, sizeof(*next), replyBy));
  return checkWireAddress(*next);
}

tcclResult_t Bootstrap::create(const void* id, int rank, int nranks,
                               std::unique_ptr<Bootstrap>* out) {
  TCCL_ARG_CHECK(id != nullptr && out != nullptr, "bootstrap: null id or output");
  TCCL_ARG_CHECK(nranks >= 1 && rank >= 0 && rank < nranks,
                 "bootstrap: invalid rank %d for %d ranks", rank, nranks);
  UniqueIdData idData;
  TCCL_CHECK(decodeUniqueId(id, &idData));

  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->secret_ = idData.secret;
  b->impl_ = std::make_unique<Impl>();
  Impl& im = *b->impl_;
  im.rank = rank;
  im.nranks = nranks;
  im.secret = idData.secret;
  im.timeout = static_cast<double>(tcclParamBootstrapTimeout());
  im.peers.resize(nranks);
  im.sendConns.resize(nranks);

  if (idData.startRoot && rank == 0) TCCL_CHECK(bootstrapRootCreate(idData.root, im.secret));
  TCCL_CHECK(findInterfaceAddress(&b->localAddr_));
  TCCL_CHECK(im.listener.listen(b->localAddr_, &im.listenAddr));
  TCCL_CHECK(im.startReceiver());  // before check-in: our predecessor may send at once

  SocketAddress next;
  TCCL_CHECK(im.checkIn(idData.root, &next));
  im.peers[rank] = im.listenAddr;
  im.peers[(rank + 1) % nranks] = next;
  TCCL_CHECK(im.ringAllGather(im.peers.data(), sizeof(SocketAddress)));
  for (const SocketAddress& a : im.peers) TCCL_CHECK(checkWireAddress(a));
  TCCL_INFO(kBootstrap, "bootstrap: rank %d of %d ready, listening on %s", rank, nranks,
            im.listenAddr.toString().c_str());
  *out = std::move(b);
  return tcclSuccess;
}

Bootstrap::~Bootstrap() = default;

void Bootstrap::setInterrupt(const std::atomic<uint32_t>* counter) {
  // (Set before the communicator is shared: the caller's thread reads it in recv.)
  impl_->interrupt = counter;
}

// ---- the public calls -------------------------------------------------------------------------

tcclResult_t Bootstrap::allGather(void* data, size_t bytesPerRank) {
  TCCL_ARG_CHECK(data != nullptr || bytesPerRank == 0, "bootstrap allGather: null buffer");
  TCCL_ARG_CHECK(bytesPerRank <= kMaxBootstrapMessage,
                 "bootstrap allGather: %zu bytes per "
                 "rank exceed the bound of %zu",
                 bytesPerRank, kMaxBootstrapMessage);
  return impl_->ringAllGather(data, bytesPerRank);
}

tcclResult_t Bootstrap::send(int peer, uint32_t tag, const void* data, size_t size) {
  return impl_->sendMsg(peer, kMsgUser, tag, data, size);
}

tcclResult_t Bootstrap::recv(int peer, uint32_t tag, void* data, size_t size) {
  return impl_->recvMsg(peer, kMsgUser, tag, data, size);
}

// Dissemination barrier: with k = 1, 2, 4, ... every rank signals rank+k, waits for rank-k.
// After ceil(log2 n) rounds each rank has heard, directly or not, from every other.
tcclResult_t Bootstrap::barrier(uint32_t tag) {
  for (int k = 1; k < nranks_; k <<= 1) {
    TCCL_CHECK(impl_->sendMsg((rank_ + k) % nranks_, kMsgBarrier, tag, nullptr, 0));
    TCCL_CHECK(impl_->recvMsg((rank_ - k + nranks_) % nranks_, kMsgBarrier, tag, nullptr, 0));
  }
  return tcclSuccess;
}

double bootstrapTimeoutSeconds() { return double(tcclParamBootstrapTimeout()); }

}  // namespace tccl
