/*
 * transport/net/ib/net_ib.cc: the verbs Net's connections and data path. See net_ib.h for the
 * picture; ib_device.cc finds the devices.
 *
 * Added in: stage 6.
 */
#include "transport/net/ib/net_ib.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tccl/common/bootstrap.h"
#include "tccl/common/trace.h"

// The QP's transport timeout, 4.096 us x 2^TIMEOUT per try, and its retries (NCCL_IB_TIMEOUT,
// NCCL_IB_RETRY_CNT): a lost packet, a dead peer or a wrong GID fails after about
// TIMEOUT x RETRY_CNT tries, as a completion with status 12.
TCCL_PARAM(IbTimeout, "IB_TIMEOUT", 20)
TCCL_PARAM(IbRetryCnt, "IB_RETRY_CNT", 7)
// Service level (InfiniBand) and traffic class (RoCE) of the QPs (NCCL_IB_SL, NCCL_IB_TC).
TCCL_PARAM(IbSl, "IB_SL", 0)
TCCL_PARAM(IbTc, "IB_TC", 0)

namespace tccl {

struct IbSendComm;  // (below; the handle keeps a half-made one)

namespace {

constexpr uint64_t kIbHandleMagic = 0x7cc11b0000000001ull;
constexpr uint64_t kIbInfoMagic = 0x7cc11b0000000002ull;
// Messages in flight per connection: requests, ready-to-receive entries, posted receives.
constexpr int kIbMaxRequests = 32;
constexpr int kIbCqEntries = 4 * kIbMaxRequests;  // a receive's two completions, a send's one
constexpr int kIbPollBatch = 16;
constexpr uint64_t kIbPeekIntervalNs = 10'000'000;  // how often a waiting receive looks for a close

/// The listener's handle. The sender keeps its half-made comm in it between connect() calls.
struct IbNetHandle {
  uint64_t magic;
  uint64_t token;
  SocketAddress addr;     // the handshake socket
  IbSendComm* pending;    // sender only: the comm whose handshake is under way
};
static_assert(sizeof(IbNetHandle) <= sizeof(NetHandle), "IB handle too large");

/// One entry of the ready-to-receive FIFO: a posted receive, as the receiver announces it.
/// `seq` is last: an RDMA write lands in address order on the NICs we know (NCCL's FIFO relies
/// on the same), so once the sender sees the sequence number, the rest of the entry is there.
struct alignas(32) IbFifoEntry {
  uint64_t addr;
  uint32_t rkey;
  uint32_t size;
  uint64_t seq;  // message index + 1: 0 is "never written"
};

}  // namespace

// This Net's objects derive from net.h's opaque handles under names of their own (see
// socket/net_socket.cc: two Nets defining net.h's names broke the one-definition rule).
struct IbMr : NetMr {
  explicit IbMr(ibv_mr* m) : mr(m) {}
  ibv_mr* mr;
};

struct IbComm;

struct IbRequest : NetRequest {
  IbComm* comm = nullptr;
  bool used = false;
  bool isRecv = false;
  int pending = 0;      // completions still to come
  uint64_t size = 0;    // send: the message's; receive: from the immediate
  bool closed = false;  // receive: the peer closed its handshake socket instead
};

/// One connection, either direction.
struct IbComm {
  IbNet* net = nullptr;
  const IbDevice* dev = nullptr;
  Socket sock;  // the handshake socket, kept open for the connection's life
  std::string peerName;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  IbRequest reqs[kIbMaxRequests];
  uint64_t posted = 0;  // messages (send) or receives (receive) made so far
  // The ready-to-receive FIFO. Sender: the entries the receiver writes. Receiver: the entries
  // it writes from (an RDMA write reads registered memory).
  IbFifoEntry fifo[kIbMaxRequests] = {};
  ibv_mr* fifoMr = nullptr;
  uint64_t remoteFifo = 0;  // receiver: the sender's FIFO, and its key
  uint32_t remoteFifoRkey = 0;
  IbQpInfo reply{};  // sender: the receiver's answer, read a piece at a time
  size_t replyGot = 0;
  bool peerReady = false;  // receiver: the sender's QP is in RTS (its "ready" byte came)
  uint64_t token = 0;
  uint64_t lastPeekNs = 0;
  bool peerGone = false;  // receiver: the sender closed the connection (see pollCompletions)

  ~IbComm() {
    // The socket first: a peer whose write into our QP fails from now on finds the close
    // already there, and takes the failure for the end of the connection (pollCompletions).
    sock.close();
    const IbvApi& api = net->api();
    if (qp) api.destroyQp(qp);
    if (cq) api.destroyCq(cq);
    if (fifoMr) api.deregMr(fifoMr);
  }
};

struct IbSendComm : NetSendComm, IbComm {};
struct IbRecvComm : NetRecvComm, IbComm {};

struct IbListenComm : NetListenComm {
  Socket listener;
  uint64_t token = 0;
  int dev = 0;
};

namespace {

const char* linkLayerName(uint8_t ll) {
  return ll == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand";
}

/// The comm's CQ, QP (in INIT) and registered FIFO.
tcclResult_t createQp(IbComm& c) {
  const IbvApi& api = c.net->api();
  const IbDevice& d = *c.dev;
  c.cq = api.createCq(d.context, kIbCqEntries, nullptr, nullptr, 0);
  if (c.cq == nullptr) {
    TCCL_WARN("NET/IB: %s: ibv_create_cq failed: %s", d.name.c_str(), strerror(errno));
    return tcclSystemError;
  }
  ibv_qp_init_attr init{};
  init.send_cq = c.cq;
  init.recv_cq = c.cq;
  init.qp_type = IBV_QPT_RC;  // reliable connected: in order, acknowledged, retried
  init.cap.max_send_wr = 2 * kIbMaxRequests;
  init.cap.max_recv_wr = kIbMaxRequests;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  c.qp = api.createQp(d.pd, &init);
  if (c.qp == nullptr) {
    TCCL_WARN("NET/IB: %s: ibv_create_qp failed: %s", d.name.c_str(), strerror(errno));
    return tcclSystemError;
  }
  // RESET -> INIT: the port, the partition, and what the peer may do to our memory.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = d.port;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  if (api.modifyQp(c.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                 IBV_QP_ACCESS_FLAGS) != 0) {
    TCCL_WARN("NET/IB: %s: QP %u to INIT failed: %s", d.name.c_str(), c.qp->qp_num,
              strerror(errno));
    return tcclSystemError;
  }
  c.fifoMr = api.regMr(d.pd, c.fifo, sizeof(c.fifo),
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (c.fifoMr == nullptr) {
    TCCL_WARN("NET/IB: %s: ibv_reg_mr of the FIFO failed: %s", d.name.c_str(), strerror(errno));
    return tcclSystemError;
  }
  return tcclSuccess;
}

IbQpInfo localInfo(const IbComm& c) {
  IbQpInfo i{};
  i.magic = kIbInfoMagic;
  i.token = c.token;
  i.qpn = c.qp->qp_num;
  i.lid = c.dev->portAttr.lid;
  i.linkLayer = c.dev->portAttr.link_layer;
  i.mtu = uint8_t(c.dev->portAttr.active_mtu);
  i.gidIndex = c.dev->gidIndex;
  memcpy(i.gid, c.dev->gid.raw, sizeof(i.gid));
  i.fifoAddr = reinterpret_cast<uintptr_t>(c.fifo);
  i.fifoRkey = c.fifoMr->rkey;
  return i;
}

/// INIT -> RTR -> RTS, with the peer's QP described by `peer`.
tcclResult_t connectQp(IbComm& c, const IbQpInfo& peer) {
  const IbvApi& api = c.net->api();
  const IbDevice& d = *c.dev;
  if (peer.linkLayer != d.portAttr.link_layer) {
    TCCL_WARN("NET/IB: %s's port is %s, ours (%s:%u) is %s: they cannot connect",
              c.peerName.c_str(), linkLayerName(peer.linkLayer), d.name.c_str(),
              unsigned(d.port), linkLayerName(d.portAttr.link_layer));
    return tcclRemoteError;
  }
  // RTR: where the peer is (its QP, and its address: a LID on InfiniBand, a GID -- routed,
  // "global" -- on RoCE), the path MTU both ports support, the first packet number expected.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = ibv_mtu(std::min<int>(peer.mtu, d.portAttr.active_mtu));
  a.dest_qp_num = peer.qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;  // 0.64 ms before a sender retries a write that found no receive
  a.ah_attr.port_num = d.port;
  a.ah_attr.sl = uint8_t(tcclParamIbSl());
  if (d.roce) {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, peer.gid, sizeof(peer.gid));
    a.ah_attr.grh.sgid_index = uint8_t(d.gidIndex);
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = uint8_t(tcclParamIbTc());
  } else {
    a.ah_attr.dlid = peer.lid;
  }
  if (api.modifyQp(c.qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                 IBV_QP_MIN_RNR_TIMER) != 0) {
    TCCL_WARN("NET/IB: QP %u to RTR (peer %s, QP %u) failed: %s", c.qp->qp_num,
              c.peerName.c_str(), peer.qpn, strerror(errno));
    return tcclSystemError;
  }
  // RTS: how long to wait for an acknowledgement, how often to retry.
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = uint8_t(tcclParamIbTimeout());
  s.retry_cnt = uint8_t(tcclParamIbRetryCnt());
  s.rnr_retry = 7;  // "forever": a write that finds no posted receive waits for one
  s.sq_psn = 0;
  s.max_rd_atomic = 1;
  if (api.modifyQp(c.qp, &s, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    TCCL_WARN("NET/IB: QP %u to RTS failed: %s", c.qp->qp_num, strerror(errno));
    return tcclSystemError;
  }
  TCCL_INFO(kNet, "NET/IB: %s:%u QP %u connected to %s QP %u (%s, MTU %d)", d.name.c_str(),
            unsigned(d.port), c.qp->qp_num, c.peerName.c_str(), peer.qpn,
            linkLayerName(peer.linkLayer), 128 << int(a.path_mtu));
  return tcclSuccess;
}

IbRequest* newRequest(IbComm& c, bool isRecv) {
  IbRequest& r = c.reqs[c.posted % kIbMaxRequests];
  if (r.used) return nullptr;
  r = IbRequest{};
  r.comm = &c;
  r.used = true;
  r.isRecv = isRecv;
  return &r;
}

/// Has the peer closed its end of the handshake socket (cleanly)? A system call.
bool peerClosedNow(IbComm& c) {
  char b;
  return ::recv(c.sock.fd(), &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/// Takes what the CQ holds; a failed completion is reported with its peer and QP.
tcclResult_t pollCompletions(IbComm& c) {
  ibv_wc wcs[kIbPollBatch];
  const int n = c.net->api().pollCq(c.cq, kIbPollBatch, wcs);
  if (n < 0) {
    TCCL_WARN("NET/IB: ibv_poll_cq failed on QP %u (peer %s)", c.qp->qp_num, c.peerName.c_str());
    return tcclSystemError;
  }
  for (int i = 0; i < n; i++) {
    const ibv_wc& wc = wcs[i];
    IbRequest* r = reinterpret_cast<IbRequest*>(uintptr_t(wc.wr_id));
    // A receiver keeps a ready-to-receive entry written for every free slot, at all times: a
    // sender that destroys its communicator leaves some of those writes without a QP to land
    // in, and they fail (status 12 after the retries, at once on the fake device). If the
    // sender has closed the connection, that is its end, not an error: the receives are
    // reported closed (kNetClosed), as on sockets, and the QP, now in error, is used no more.
    if (wc.status != IBV_WC_SUCCESS && r->isRecv && (c.peerGone || peerClosedNow(c))) {
      if (!c.peerGone) {
        TCCL_INFO(kNet, "NET/IB: %s closed the connection (QP %u)", c.peerName.c_str(),
                  c.qp->qp_num);
      }
      c.peerGone = true;
      r->closed = true;
      continue;
    }
    if (wc.status != IBV_WC_SUCCESS) {
      TCCL_WARN("NET/IB: work completion error on QP %u (%s:%u, peer %s): %s, vendor error "
                "0x%x", wc.qp_num, c.dev->name.c_str(), unsigned(c.dev->port),
                c.peerName.c_str(), wcStatusText(c.net->api(), wc.status).c_str(),
                wc.vendor_err);
      return tcclRemoteError;
    }
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) r->size = ntohl(wc.imm_data);
    r->pending--;
  }
  return tcclSuccess;
}

/// A receive still waiting: has the peer closed its handshake socket (cleanly)? Looked at
/// every kIbPeekIntervalNs only: it costs a system call.
bool peerClosed(IbComm& c) {
  if (c.peerGone) return true;
  const uint64_t now = traceNowNs();
  if (now - c.lastPeekNs < kIbPeekIntervalNs) return false;
  c.lastPeekNs = now;
  return peerClosedNow(c);
}

/// The sender's side of the flow control: is the receiver's ready-to-receive entry for message
/// `k` there (*ready), and how many bytes of a `size`-byte message may be written into the
/// buffer it announces (*bytes: net.h's rule for one that does not fit)?
tcclResult_t readFifoEntry(const IbFifoEntry& e, uint64_t k, size_t size, bool* ready,
                           uint32_t* bytes) {
  // >>> exercise 6.1: the sender reads its ready-to-receive entry
  // The receiver RDMA-writes entry k with seq = k + 1, last: an entry from an earlier lap of
  // the ring holds an older seq. Acquire: the fields written before seq are read after it.
  *ready = __atomic_load_n(&e.seq, __ATOMIC_ACQUIRE) == k + 1;
  // Larger than the buffer announced: no byte is written, the immediate still says the size,
  // and the receiver's consumer reports the mismatch.
  *bytes = size <= e.size ? uint32_t(size) : 0;
  return tcclSuccess;
  // <<< exercise 6.1
}

}  // namespace

tcclResult_t checkIbQpInfo(const IbQpInfo& info, uint64_t token, bool fromSender) {
  if (info.magic != kIbInfoMagic || info.token != token) {
    TCCL_WARN("NET/IB: a handshake that is not from our peer (magic or token differ)");
    return tcclRemoteError;
  }
  if (info.mtu < IBV_MTU_256 || info.mtu > IBV_MTU_4096) {
    TCCL_WARN("NET/IB: the peer reports MTU code %u (1..5)", unsigned(info.mtu));
    return tcclRemoteError;
  }
  if (info.linkLayer != IBV_LINK_LAYER_INFINIBAND && info.linkLayer != IBV_LINK_LAYER_ETHERNET) {
    TCCL_WARN("NET/IB: the peer reports link layer %u", unsigned(info.linkLayer));
    return tcclRemoteError;
  }
  if (fromSender && (info.fifoAddr == 0 || info.fifoAddr % alignof(IbFifoEntry) != 0)) {
    TCCL_WARN("NET/IB: the sender's ready-to-receive FIFO address is not usable");
    return tcclRemoteError;
  }
  return tcclSuccess;
}

tcclResult_t IbNet::listen(int dev, NetHandle* handle, NetListenComm** listenComm) {
  TCCL_ARG_CHECK(dev >= 0 && dev < devices(), "NET/IB: no device %d", dev);
  auto l = std::make_unique<IbListenComm>();
  SocketAddress addr;
  TCCL_CHECK(netListenAddress(&addr));
  addr.setPort(0);
  IbNetHandle h{};
  h.magic = kIbHandleMagic;
  h.token = randomU64();
  TCCL_CHECK(l->listener.listen(addr, &h.addr, 16));
  l->token = h.token;
  l->dev = dev;
  memset(handle, 0, sizeof(*handle));
  memcpy(handle->bytes, &h, sizeof(h));
  *listenComm = l.release();
  return tcclSuccess;
}

tcclResult_t IbNet::connect(int dev, NetHandle* handle, NetSendComm** sendComm) {
  *sendComm = nullptr;
  TCCL_ARG_CHECK(dev >= 0 && dev < devices(), "NET/IB: no device %d", dev);
  IbNetHandle h;
  memcpy(&h, handle->bytes, sizeof(h));
  if (h.magic != kIbHandleMagic || !h.addr.valid() || h.addr.len > sizeof(h.addr.storage)) {
    TCCL_WARN("NET/IB: the peer's connection handle is not an IB handle");
    return tcclRemoteError;
  }
  if (h.pending == nullptr) {
    // First call: our QP, then our half of the handshake. Never waits for the receiver: TCP
    // completes the connection from the listen backlog and the info fits the socket buffer.
    auto c = std::make_unique<IbSendComm>();
    c->net = this;
    c->dev = &devs_[size_t(dev)];
    c->token = h.token;
    c->peerName = h.addr.toString();
    TCCL_CHECK(createQp(*c));
    Deadline deadline = deadlineIn(bootstrapTimeoutSeconds());
    TCCL_CHECK(c->sock.connect(h.addr, deadline));
    const IbQpInfo mine = localInfo(*c);
    TCCL_CHECK(c->sock.sendAll(&mine, sizeof(mine), deadline));
    TCCL_CHECK(c->sock.setNonBlocking(true));
    h.pending = c.release();
    memcpy(handle->bytes, &h, sizeof(h));
    return tcclSuccess;  // the receiver's answer comes later: call again
  }
  // Later calls: the receiver's answer, as far as it has come.
  IbSendComm* c = h.pending;
  size_t n = 0;
  TCCL_CHECK(c->sock.tryRecv(reinterpret_cast<char*>(&c->reply) + c->replyGot,
                             sizeof(c->reply) - c->replyGot, &n));
  c->replyGot += n;
  if (c->replyGot < sizeof(c->reply)) return tcclSuccess;
  h.pending = nullptr;
  memcpy(handle->bytes, &h, sizeof(h));
  std::unique_ptr<IbSendComm> owned(c);
  TCCL_CHECK(checkIbQpInfo(c->reply, c->token, /*fromSender=*/false));
  TCCL_CHECK(connectQp(*c, c->reply));
  // Our QP takes packets now: tell the receiver, whose QP reached RTS before ours and which
  // must not write its first ready-to-receive entry into a QP still in INIT (the packet
  // would be dropped and retried only after TCCL_IB_TIMEOUT, seconds later). One byte, into
  // an empty socket buffer: never blocks. (NCCL: the `ready` flag of ncclIbConnect.)
  const char ready = 1;
  size_t sent = 0;
  TCCL_CHECK(c->sock.trySend(&ready, 1, &sent));
  if (sent != 1) {
    TCCL_WARN("NET/IB: could not tell %s that QP %u is ready", c->peerName.c_str(),
              c->qp->qp_num);
    return tcclSystemError;
  }
  *sendComm = owned.release();
  return tcclSuccess;
}

void IbNet::abandonConnect(NetHandle* handle) {
  IbNetHandle h;
  memcpy(&h, handle->bytes, sizeof(h));
  if (h.magic != kIbHandleMagic || h.pending == nullptr) return;
  delete h.pending;  // its QP, CQ and FIFO; its socket closes (the receiver's accept sees it)
  h.pending = nullptr;
  memcpy(handle->bytes, &h, sizeof(h));
}

tcclResult_t IbNet::accept(NetListenComm* listenComm, NetRecvComm** recvComm) {
  auto* l = static_cast<IbListenComm*>(listenComm);
  *recvComm = nullptr;
  Deadline deadline = deadlineIn(bootstrapTimeoutSeconds());
  for (;;) {
    Socket s;
    TCCL_CHECK(l->listener.accept(&s, deadline));
    IbQpInfo peer;
    if (s.recvAll(&peer, sizeof(peer), deadline) != tcclSuccess) continue;
    if (checkIbQpInfo(peer, l->token, /*fromSender=*/true) != tcclSuccess) {
      TCCL_WARN("NET/IB: refused a connection from %s", s.peer().toString().c_str());
      continue;  // a stray or hostile connection: keep waiting for our sender
    }
    auto c = std::make_unique<IbRecvComm>();
    c->net = this;
    c->dev = &devs_[size_t(l->dev)];
    c->token = l->token;
    c->peerName = s.peer().toString();
    c->remoteFifo = peer.fifoAddr;
    c->remoteFifoRkey = peer.fifoRkey;
    TCCL_CHECK(createQp(*c));
    TCCL_CHECK(connectQp(*c, peer));
    const IbQpInfo mine = localInfo(*c);
    TCCL_CHECK(s.sendAll(&mine, sizeof(mine), deadline));
    TCCL_CHECK(s.setNonBlocking(true));
    c->sock = std::move(s);
    *recvComm = c.release();
    return tcclSuccess;
  }
}

tcclResult_t IbNet::regMr(NetSendComm* sendComm, NetRecvComm* recvComm, void* data, size_t size,
                          NetMemType type, NetMr** mhandle) {
  *mhandle = nullptr;
  if (type != NetMemType::kHost) {
    // Registering a device pointer with ibv_reg_mr needs the nvidia-peermem module (NCCL's
    // older GDR path); tccl registers GPU memory only by dma-buf.
    TCCL_WARN("NET/IB: GPU memory is registered by dma-buf only (regMrDmaBuf)");
    return tcclInvalidUsage;
  }
  IbComm& c = sendComm ? static_cast<IbComm&>(*static_cast<IbSendComm*>(sendComm))
                       : static_cast<IbComm&>(*static_cast<IbRecvComm*>(recvComm));
  ibv_mr* mr = api_.regMr(c.dev->pd, data, size, IBV_ACCESS_LOCAL_WRITE |
                                                     IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) {
    TCCL_WARN("NET/IB: ibv_reg_mr of %zu bytes failed: %s (is the locked-memory limit, "
              "ulimit -l, large enough?)", size, strerror(errno));
    return tcclSystemError;
  }
  *mhandle = new IbMr(mr);
  return tcclSuccess;
}

tcclResult_t IbNet::regMrDmaBuf(NetSendComm* sendComm, NetRecvComm* recvComm, void* data,
                                size_t size, uint64_t offset, int fd, NetMr** mhandle) {
  *mhandle = nullptr;
  IbComm& c = sendComm ? static_cast<IbComm&>(*static_cast<IbSendComm*>(sendComm))
                       : static_cast<IbComm&>(*static_cast<IbRecvComm*>(recvComm));
  if (!c.dev->dmabuf) {
    TCCL_WARN("NET/IB: %s cannot register GPU memory by dma-buf (its probe said no)",
              c.dev->name.c_str());
    return tcclInvalidUsage;
  }
  // iova = the GPU address: the peer's RDMA writes name this address and the MR's rkey, as
  // they name a host address for host memory.
  ibv_mr* mr = api_.regDmabufMr(c.dev->pd, offset, size, reinterpret_cast<uintptr_t>(data), fd,
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) {
    TCCL_WARN("NET/IB: ibv_reg_dmabuf_mr of %zu bytes of GPU memory at %p failed: %s", size,
              data, strerror(errno));
    return tcclSystemError;
  }
  TCCL_INFO(kNet, "NET/IB: %zu bytes of GPU memory at %p registered by dma-buf (fd %d)", size,
            data, fd);
  *mhandle = new IbMr(mr);
  return tcclSuccess;
}

tcclResult_t IbNet::deregMr(NetSendComm*, NetRecvComm*, NetMr* mhandle) {
  if (mhandle == nullptr) return tcclSuccess;
  auto* m = static_cast<IbMr*>(mhandle);
  api_.deregMr(m->mr);
  delete m;
  return tcclSuccess;
}

tcclResult_t IbNet::irecv(NetRecvComm* comm, void* data, size_t size, NetMr* mhandle,
                          NetRequest** request) {
  IbComm* c = static_cast<IbRecvComm*>(comm);
  *request = nullptr;
  TCCL_ARG_CHECK(size <= UINT32_MAX, "NET/IB: a receive of %zu bytes (at most 4 GiB - 1)", size);
  TCCL_ARG_CHECK(size == 0 || mhandle != nullptr, "NET/IB: a receive into unregistered memory");
  if (!c->peerReady) {
    // The sender's QP may still be on its way to RTS: nothing may be written to it before
    // its "ready" byte (connect, above). Until then, no receive: call again.
    char ready = 0;
    size_t n = 0;
    TCCL_CHECK(c->sock.tryRecv(&ready, 1, &n));
    if (n == 0) return tcclSuccess;
    c->peerReady = true;
  }
  IbRequest* r = newRequest(*c, /*isRecv=*/true);
  if (r == nullptr) return tcclSuccess;  // kIbMaxRequests in flight: call again
  if (c->peerGone) {  // nothing more will come: the receive completes as closed
    r->closed = true;
    c->posted++;
    *request = r;
    return tcclSuccess;
  }
  const uint64_t k = c->posted;
  // 1. The receive work request the sender's write-with-immediate will consume (no buffer:
  //    the data goes where the entry below says; the receive only carries the immediate).
  //    Posted before the entry, so the write can never find the queue empty.
  ibv_recv_wr rwr{};
  rwr.wr_id = reinterpret_cast<uintptr_t>(r);
  ibv_recv_wr* badR = nullptr;
  if (api_.postRecv(c->qp, &rwr, &badR) != 0) {
    TCCL_WARN("NET/IB: ibv_post_recv on QP %u failed: %s", c->qp->qp_num, strerror(errno));
    return tcclSystemError;
  }
  // 2. The ready-to-receive entry, RDMA-written into the sender's FIFO slot for message k.
  IbFifoEntry& e = c->fifo[k % kIbMaxRequests];
  e.addr = reinterpret_cast<uintptr_t>(data);
  e.rkey = size ? static_cast<IbMr*>(mhandle)->mr->rkey : 0;
  e.size = uint32_t(size);
  e.seq = k + 1;
  ibv_sge sge{reinterpret_cast<uintptr_t>(&e), sizeof(e), c->fifoMr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = reinterpret_cast<uintptr_t>(r);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = c->remoteFifo + (k % kIbMaxRequests) * sizeof(IbFifoEntry);
  wr.wr.rdma.rkey = c->remoteFifoRkey;
  ibv_send_wr* bad = nullptr;
  if (api_.postSend(c->qp, &wr, &bad) != 0) {
    TCCL_WARN("NET/IB: posting a ready-to-receive entry on QP %u failed: %s", c->qp->qp_num,
              strerror(errno));
    return tcclSystemError;
  }
  r->pending = 2;  // the entry's write, and the data's arrival
  c->posted++;
  *request = r;
  return tcclSuccess;
}

tcclResult_t IbNet::isend(NetSendComm* comm, void* data, size_t size, NetMr* mhandle,
                          NetRequest** request) {
  IbComm* c = static_cast<IbSendComm*>(comm);
  *request = nullptr;
  TCCL_ARG_CHECK(size <= UINT32_MAX, "NET/IB: a message of %zu bytes (at most 4 GiB - 1)", size);
  const uint64_t k = c->posted;
  const IbFifoEntry& e = c->fifo[k % kIbMaxRequests];
  // Flow control: no entry for message k yet, no send (the receiver has posted no buffer).
  bool ready = false;
  uint32_t bytes = 0;
  TCCL_CHECK(readFifoEntry(e, k, size, &ready, &bytes));
  if (!ready) return tcclSuccess;
  IbRequest* r = newRequest(*c, /*isRecv=*/false);
  if (r == nullptr) return tcclSuccess;
  TCCL_ARG_CHECK(bytes == 0 || mhandle != nullptr, "NET/IB: a send from unregistered memory");
  ibv_sge sge{reinterpret_cast<uintptr_t>(data), bytes,
              bytes ? static_cast<IbMr*>(mhandle)->mr->lkey : 0};
  ibv_send_wr wr{};
  wr.wr_id = reinterpret_cast<uintptr_t>(r);
  wr.sg_list = bytes ? &sge : nullptr;
  wr.num_sge = bytes ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(uint32_t(size));
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = e.addr;
  wr.wr.rdma.rkey = e.rkey;
  ibv_send_wr* bad = nullptr;
  if (api_.postSend(c->qp, &wr, &bad) != 0) {
    TCCL_WARN("NET/IB: ibv_post_send on QP %u failed: %s", c->qp->qp_num, strerror(errno));
    return tcclSystemError;
  }
  r->pending = 1;
  r->size = size;
  c->posted++;
  *request = r;
  return tcclSuccess;
}

tcclResult_t IbNet::test(NetRequest* request, bool* done, size_t* size) {
  auto* r = static_cast<IbRequest*>(request);
  *done = false;
  IbComm& c = *r->comm;
  if (r->pending > 0) TCCL_CHECK(pollCompletions(c));
  if (r->pending > 0 && r->isRecv && peerClosed(c)) r->closed = true;
  if (r->pending > 0 && !r->closed) return tcclSuccess;
  *done = true;
  if (size) *size = r->closed ? kNetClosed : size_t(r->size);
  r->used = false;
  return tcclSuccess;
}

tcclResult_t IbNet::closeSend(NetSendComm* comm) {
  delete static_cast<IbSendComm*>(comm);  // the QP, the CQ, the FIFO's MR; the socket closes: the receiver sees it
  return tcclSuccess;
}

tcclResult_t IbNet::closeRecv(NetRecvComm* comm) {
  delete static_cast<IbRecvComm*>(comm);
  return tcclSuccess;
}

tcclResult_t IbNet::closeListen(NetListenComm* comm) {
  delete static_cast<IbListenComm*>(comm);
  return tcclSuccess;
}

Net& ibNet() {
  // Never freed (as NCCL's): communicators may outlive main's statics. libibverbs is opened
  // at its first use (IbNet::init).
  static IbNet* net = new IbNet(nullptr);
  return *net;
}

}  // namespace tccl
