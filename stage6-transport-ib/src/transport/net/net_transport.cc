/*
 * transport/net/net_transport.cc: setup, connect and proxy progress of the network transport.
 * See net_transport.h for the picture.
 *
 * Added in: stage 6 (the FIFO half of stage 1's transport/socket/socket_transport.cc).
 */
#include "transport/net/net_transport.h"

#include <unistd.h>

#include <algorithm>

#include "comm_context.h"
#include "trace.h"
#include "transport/net/gdr.h"

namespace tccl {

namespace {

/// One connector's Net objects and the steps in flight.
struct NetResources : ConnectorResources {
  Net* net = nullptr;
  NetListenComm* listen = nullptr;
  NetSendComm* send = nullptr;
  NetRecvComm* recv = nullptr;
  NetMr* mr = nullptr;          // the FIFO slots, registered with the Net
  NetHandle peerHandle{};       // send side: where to connect (kept for finishConnect)
  NetRequest* reqs[kNSteps] = {};
  uint64_t posted = 0;          // steps handed to the Net (send: isend; receive: irecv)
  int64_t sizes[kNSteps] = {};  // send side: each step's bytes, for the step timeline
  uint64_t t0[kNSteps] = {};    // step timeline: when each step was handed to the Net
  uint64_t lastMovedNs = 0;     // when a step last moved here (pollBudgetUs)
  // GPUDirect RDMA (receive side, kernels' connectors, TCCL_NET_GDR_ENABLE): the slots in GPU
  // memory, which the NIC writes; gdrDev is their device, -1 without.
  int gdrDev = -1;
  void* gdrSlots = nullptr;
  size_t gdrBytes = 0;
  std::string gdrWhyNot;        // asked for and not used: why (for the connect line)

  ~NetResources() override {
    // The comms go first (a socket comm closes its sockets: the peer sees a clean close); the
    // registration before the memory it names.
    if (mr) net->deregMr(send, recv, mr);
    if (send) net->closeSend(send);
    if (send == nullptr) net->abandonConnect(&peerHandle);  // a connect left half-way
    if (recv) net->closeRecv(recv);
    if (listen) net->closeListen(listen);
    gdrFree(gdrSlots);
  }
};

/// A Net without fds (verbs) is polled: without pause while this connection moved something
/// lately (more is likely to follow within microseconds), else at least every kNapUs (a
/// receive is posted on every free slot at all times, so "work in flight" alone would keep
/// the engine busy forever on an idle communicator).
constexpr uint64_t kBusyNs = 200'000;
constexpr int kNapUs = 1000;
int pollBudgetUs(const NetResources& r) {
  return traceNowNs() - r.lastMovedNs < kBusyNs ? 0 : kNapUs;
}

NetResources& res(Connector& c) { return static_cast<NetResources&>(*c.resources); }
const NetResources& res(const Connector& c) {
  return static_cast<const NetResources&>(*c.resources);
}

/// GPUDirect RDMA for this connector? Only a receive side that serves kernels, when asked
/// (TCCL_NET_GDR_ENABLE=1) and both halves of the probe say yes: the Net can register a
/// dma-buf, and the GPU can export one. Else *why says what is missing (empty: not asked).
bool useGdr(const CommContext& comm, const Connector& c, const NetProperties& props,
            std::string* why) {
  why->clear();
  if (c.isSend || !c.forDevice || netGdrEnabled() == 0) return false;
  if (!props.dmabuf) {
    *why = "the Net cannot register GPU memory by dma-buf";
    return false;
  }
  return gdrDmabufSupported(comm.cudaDev, why);
}

/// Both sides: the FIFO, and whether the Net may use the executors' own buffers (direct mode).
tcclResult_t setupCommon(CommContext& comm, Connector& c, Net& net, NetConnectInfo* mine) {
  NetProperties props;
  TCCL_CHECK(net.getProperties(0, &props));
  auto r = std::make_unique<NetResources>();
  r->net = &net;
  const bool gdr = useGdr(comm, c, props, &r->gdrWhyNot);
  // With GPUDirect RDMA the slots are in GPU memory (below): the host block keeps the counters.
  TCCL_CHECK(allocConnectorFifo(comm, c, /*hostSlots=*/!gdr));
  if (gdr) {
    TCCL_CHECK(gdrAlloc(comm.cudaDev, kNSteps * c.conn->stepBytes, &r->gdrSlots, &r->gdrBytes));
    r->gdrDev = comm.cudaDev;
    c.conn->buff = static_cast<char*>(r->gdrSlots);  // the kernel reads its steps here
  }
  // Direct mode needs a Net that reaches any host memory: verbs reach only registered regions,
  // and registering each user buffer per call would cost more than the copy it saves.
  c.conn->direct = props.anyHostMemory ? 1 : 0;
  c.resources = std::move(r);
  *mine = NetConnectInfo{};
  mine->stepBytes = c.conn->stepBytes;
  mine->rank = comm.rank;
  return tcclSuccess;
}

/// Registers the FIFO's slots with the Net, once per connection: host memory, or GPU memory
/// by dma-buf (GPUDirect RDMA).
tcclResult_t registerSlots(Connector& c) {
  NetResources& r = res(c);
  const size_t bytes = kNSteps * c.conn->stepBytes;
  if (r.gdrDev < 0) {
    return r.net->regMr(r.send, r.recv, c.conn->buff, bytes, NetMemType::kHost, &r.mr);
  }
  int fd = -1;
  TCCL_CHECK(gdrExportDmabuf(r.gdrSlots, r.gdrBytes, &fd));
  const tcclResult_t res = r.net->regMrDmaBuf(r.send, r.recv, c.conn->buff, bytes, 0, fd, &r.mr);
  close(fd);  // the MR holds the dma-buf now
  return res;
}

/// "/GDRDMA", " (GPUDirect RDMA not used: ...)" or "", for the connect line.
std::string gdrNote(const NetResources& r) {
  if (r.gdrDev >= 0) return "/GDRDMA";  // NCCL's INIT line says the same
  if (!r.gdrWhyNot.empty()) return " (GPUDirect RDMA not used: " + r.gdrWhyNot + ")";
  return "";
}

/// Direct receive, proxy side: where step `step` goes, decided before its bytes arrive. The
/// consumer may have offered a user buffer for it (claims[slot] says so); otherwise we claim
/// the step for the staging slot, and one compare-and-swap settles a race with a consumer
/// offering right now. False when the step must wait: the communicator has no GPU (so the
/// consumer is a host executor, now or at its next call) and the consumer has neither offered
/// a buffer nor allowed staging for it yet (fifo.h). It decides when its receive is posted.
bool receiveDestination(const CommContext& comm, Connector& c, uint64_t step, char** dest,
                        int64_t* capacity) {
  ConnFifo* fifo = c.conn->fifo;
  const int slot = int(step % kNSteps);
  *dest = c.conn->buff + slot * c.conn->stepBytes;  // the staging slot
  *capacity = int64_t(c.conn->stepBytes);
  if (!c.conn->direct) return true;  // the Net reaches only the slots: always staged
  uint64_t seen = __atomic_load_n(&fifo->claims[slot], __ATOMIC_ACQUIRE);
  if (seen != claimValue(step, kClaimByConsumer)) {
    // A kernel never offers nor allows: on a communicator with a GPU, where the next consumer
    // may be a kernel, stage as without direct mode.
    if (comm.cudaDev < 0 && step >= __atomic_load_n(&fifo->staged, __ATOMIC_ACQUIRE)) {
      return false;  // undecided: post nothing for now
    }
    if (__atomic_compare_exchange_n(&fifo->claims[slot], &seen, claimValue(step, kClaimByProxy),
                                    false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      return true;  // ours: the consumer will copy out of the slot
    }
  }
  // The consumer's claim (acquire: its ptrs/ptrSizes are visible). A larger message is not
  // delivered there (net.h): its size reaches the consumer, whose check reports it.
  *dest = fifo->ptrs[slot];
  *capacity = fifo->ptrSizes[slot];
  return true;
}

}  // namespace

tcclResult_t checkNetConnectInfo(const NetConnectInfo& info, uint64_t expectedStepBytes) {
  if (info.stepBytes != expectedStepBytes) {
    TCCL_WARN("network transport: peer rank %d uses %lu-byte FIFO steps, we use %lu "
              "(TCCL_BUFFSIZE must be the same on every rank)",
              info.rank, (unsigned long)info.stepBytes, (unsigned long)expectedStepBytes);
    return tcclInvalidUsage;
  }
  return tcclSuccess;
}

// ---- Send side ------------------------------------------------------------------------------

tcclResult_t NetTransportSend::setup(CommContext& comm, Connector& c, ConnectInfo* info) {
  NetConnectInfo mine;
  TCCL_CHECK(setupCommon(comm, c, net_, &mine));
  packInfo(TransportId::kNet, mine, info);
  return tcclSuccess;
}

tcclResult_t NetTransportSend::connect(CommContext& comm, Connector& c,
                                       const ConnectInfo& peerInfo) {
  NetConnectInfo peer;
  TCCL_CHECK(unpackInfo(TransportId::kNet, peerInfo, &peer));
  TCCL_CHECK(checkNetConnectInfo(peer, c.conn->stepBytes));
  NetResources& r = res(c);
  r.peerHandle = peer.handle;
  // One try now: a Net whose handshake needs the receiver's answer finishes in
  // finishConnect, after every rank's receive sides have accepted (transport.cc).
  return net_.connect(0, &r.peerHandle, &r.send);
}

tcclResult_t NetTransportSend::finishConnect(CommContext& comm, Connector& c) {
  NetResources& r = res(c);
  Deadline deadline = deadlineIn(bootstrapTimeoutSeconds());
  while (r.send == nullptr) {
    TCCL_CHECK(net_.connect(0, &r.peerHandle, &r.send));
    if (r.send == nullptr && Clock::now() > deadline) {
      TCCL_WARN("NET/%s: timed out connecting to rank %d (channel %d)", net_.name(), c.peer,
                c.channel);
      return tcclRemoteError;
    }
  }
  TCCL_CHECK(registerSlots(c));
  TCCL_INFO(kNet, "channel %d: rank %d -> rank %d via NET/%s", c.channel, comm.rank, c.peer,
            net_.name());
  return tcclSuccess;
}

void NetTransportSend::free(Connector& c) {
  c.resources.reset();  // closes the Net's comms
  freeConnectorFifo(c);
}

tcclResult_t NetTransportSend::progress(CommContext& comm, Connector& c, bool* didWork) {
  NetResources& r = res(c);
  ConnFifo* fifo = c.conn->fifo;
  // Hand every published step to the Net. Acquire: the slot's bytes, its size and a lent
  // buffer (direct mode) that the executor wrote before tail are visible.
  const uint64_t published = loadAcquire(&fifo->tail);
  while (r.posted < published) {
    const int slot = int(r.posted % kNSteps);
    const int64_t size = fifo->sizes[slot];
    char* lent = fifo->ptrs[slot];
    char* data = lent ? lent : c.conn->buff + slot * c.conn->stepBytes;
    NetRequest* req = nullptr;
    TCCL_CHECK(net_.isend(r.send, data, size_t(size), r.mr, &req));
    if (req == nullptr) break;  // the Net cannot take it yet (verbs: no receive posted)
    r.reqs[slot] = req;
    r.sizes[slot] = size;
    if (comm.tracePid >= 0) r.t0[slot] = traceNowNs();
    r.posted++;
    *didWork = true;
  }
  // Retire them in order: a step the Net is done with frees its slot for the executor.
  for (;;) {
    const uint64_t step = fifo->head;  // only the proxy writes head on this side
    if (step == r.posted) return tcclSuccess;
    const int slot = int(step % kNSteps);
    bool done = false;
    TCCL_CHECK(net_.test(r.reqs[slot], &done, nullptr));
    if (!done) return tcclSuccess;
    r.reqs[slot] = nullptr;
    // On the timeline a step starts when the Net got it or when the one before it was done,
    // whichever is later: steps in flight queue behind each other, and a span from the post
    // alone would count one wait eight times.
    if (comm.tracePid >= 0) {
      traceProxyStep(comm, c.peer, c.channel, c.isSend, step, r.sizes[slot],
                     std::max(r.t0[slot], r.lastMovedNs));
    }
    r.lastMovedNs = traceNowNs();
    // Release: nothing of ours reads the slot (or the lent buffer) after this.
    storeRelease(&fifo->head, step + 1);
    *didWork = true;
  }
}

bool NetTransport::canConnect(const CommContext& comm, const PeerInfo& peer, bool) const {
  return (comm.peers[size_t(comm.rank)].nets & bit_) && (peer.nets & bit_);
}

int NetTransportSend::pollFd(const Connector& c, short* events) const {
  // Sleep on the Net only while a step is in flight (stuck: the pass just before tried it).
  const NetResources& r = res(c);
  if (r.posted == c.conn->fifo->head) return -1;
  return net_.pollFd(r.send, nullptr, events);
}

int NetTransportSend::pollWithinUs(const Connector& c) const {
  const NetResources& r = res(c);
  short events = 0;
  const bool inFlight =
      r.posted != c.conn->fifo->head || r.posted != loadAcquire(&c.conn->fifo->tail);
  if (!inFlight || net_.pollFd(r.send, nullptr, &events) >= 0) return -1;
  return pollBudgetUs(r);
}

// ---- Receive side ---------------------------------------------------------------------------

tcclResult_t NetTransportRecv::setup(CommContext& comm, Connector& c, ConnectInfo* info) {
  NetConnectInfo mine;
  TCCL_CHECK(setupCommon(comm, c, net_, &mine));
  TCCL_CHECK(net_.listen(0, &mine.handle, &res(c).listen));
  packInfo(TransportId::kNet, mine, info);
  return tcclSuccess;
}

tcclResult_t NetTransportRecv::connect(CommContext& comm, Connector& c,
                                       const ConnectInfo& peerInfo) {
  NetConnectInfo peer;
  TCCL_CHECK(unpackInfo(TransportId::kNet, peerInfo, &peer));
  TCCL_CHECK(checkNetConnectInfo(peer, c.conn->stepBytes));
  NetResources& r = res(c);
  Deadline deadline = deadlineIn(bootstrapTimeoutSeconds());
  while (r.recv == nullptr) {
    TCCL_CHECK(net_.accept(r.listen, &r.recv));
    if (r.recv == nullptr && Clock::now() > deadline) {
      TCCL_WARN("NET/%s: timed out waiting for rank %d to connect (channel %d)", net_.name(),
                c.peer, c.channel);
      return tcclRemoteError;
    }
  }
  net_.closeListen(r.listen);
  r.listen = nullptr;
  TCCL_CHECK(registerSlots(c));
  TCCL_INFO(kNet, "channel %d: rank %d <- rank %d via NET/%s%s", c.channel, comm.rank, c.peer,
            net_.name(), gdrNote(r).c_str());
  return tcclSuccess;
}

void NetTransportRecv::free(Connector& c) {
  c.resources.reset();
  freeConnectorFifo(c);
}

tcclResult_t NetTransportRecv::progress(CommContext& comm, Connector& c, bool* didWork) {
  NetResources& r = res(c);
  ConnFifo* fifo = c.conn->fifo;
  if (fifo->closed) return tcclSuccess;
  // >>> exercise 6.3: the receive side posts and publishes steps
  // Post a receive for every free slot whose destination is decided. A slot is free when the
  // executor has consumed its step: step < head + kNSteps. Acquire: the executor finished
  // reading the slot before it moved head.
  const uint64_t room = loadAcquire(&fifo->head) + kNSteps;
  while (r.posted < room) {
    char* dest = nullptr;
    int64_t capacity = 0;
    if (!receiveDestination(comm, c, r.posted, &dest, &capacity)) break;
    NetRequest* req = nullptr;
    TCCL_CHECK(net_.irecv(r.recv, dest, size_t(capacity), r.mr, &req));
    if (req == nullptr) break;
    const int slot = int(r.posted % kNSteps);
    r.reqs[slot] = req;
    if (comm.tracePid >= 0) r.t0[slot] = traceNowNs();
    r.posted++;
    *didWork = true;
  }
  // Publish what arrived, in order.
  for (;;) {
    const uint64_t step = fifo->tail;  // only the proxy writes tail on this side
    if (step == r.posted) return tcclSuccess;
    const int slot = int(step % kNSteps);
    bool done = false;
    size_t size = 0;
    TCCL_CHECK(net_.test(r.reqs[slot], &done, &size));
    if (!done) return tcclSuccess;
    r.reqs[slot] = nullptr;
    if (size == kNetClosed) {
      // A clean close between steps: the peer is done with this connection (it may simply
      // have destroyed its communicator). Only a consumer that still waits for data fails.
      TCCL_INFO(kNet, "rank %d closed its connection to us (channel %d)", c.peer, c.channel);
      __atomic_store_n(&fifo->closed, 1u, __ATOMIC_RELEASE);
      *didWork = true;
      return tcclSuccess;
    }
    // A step larger than a slot is no step of ours: a protocol error, not a size mismatch.
    if (size > c.conn->stepBytes) {
      TCCL_WARN("NET/%s: rank %d sent a step of %zu bytes (slot is %lu)", net_.name(), c.peer,
                size, (unsigned long)c.conn->stepBytes);
      return tcclRemoteError;
    }
    // GPUDirect RDMA: the NIC's writes into GPU memory must be visible to the kernel before
    // it learns of the step (NCCL: iflush after each received step into GPU memory).
    if (r.gdrDev >= 0 && size > 0) TCCL_CHECK(gdrFlush(r.gdrDev));
    // Publish the step: size first, then tail with release so the executor sees both the
    // bytes and the size once it sees the new tail.
    fifo->sizes[slot] = int64_t(size);
    if (comm.tracePid >= 0) {  // (from its post or the step before, as on the send side)
      traceProxyStep(comm, c.peer, c.channel, c.isSend, step, int64_t(size),
                     std::max(r.t0[slot], r.lastMovedNs));
    }
    r.lastMovedNs = traceNowNs();  // before tail: the consumer sees the step later
    storeRelease(&fifo->tail, step + 1);
    *didWork = true;
  }
  // <<< exercise 6.3
}

int NetTransportRecv::pollFd(const Connector& c, short* events) const {
  const NetResources& r = res(c);
  // Only a posted receive is news to wait for: with none, the FIFO is full (the executor
  // kicks us when it frees a slot) or the consumer has not decided (it kicks when it does).
  if (c.conn->fifo->closed || r.posted == c.conn->fifo->tail) return -1;
  return net_.pollFd(nullptr, r.recv, events);
}

int NetTransportRecv::pollWithinUs(const Connector& c) const {
  const NetResources& r = res(c);
  short events = 0;
  if (c.conn->fifo->closed || r.posted == c.conn->fifo->tail) return -1;
  if (net_.pollFd(nullptr, r.recv, &events) >= 0) return -1;
  return pollBudgetUs(r);
}

}  // namespace tccl
