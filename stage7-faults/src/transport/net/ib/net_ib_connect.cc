/*
 * transport/net/ib/net_ib_connect.cc: the verbs Net's connection setup -- listen, connect,
 * accept, and each QP's walk from RESET to RTS. See net_ib.h for the picture; net_ib.cc moves
 * the messages over what this file connects.
 *
 * What it is: the receiver listens on a TCP socket (the handle carries its address and a
 * token). The sender creates its CQ, QP and FIFO (createQp), connects, sends its IbQpInfo and
 * returns at once; connect() is called again until the receiver's answer is in, so it never
 * blocks on the receiver (the half-made comm waits in the handle; abandonConnect frees it).
 * accept checks the sender's info, takes its own QP to RTS (connectQp) and answers; the
 * sender's QP follows, and its "ready" byte ends the handshake.
 *
 * Invariants: a comm leaves here with its QP in RTS, its FIFO registered and (receiver) the
 * sender's FIFO address and key; the receiver's QP reaches RTS before the sender's, so nothing
 * may be written to the sender before its "ready" byte; a peer's IbQpInfo is checked
 * (checkIbQpInfo) before any of it is used, and accept refuses a connection that fails the
 * check and keeps waiting for its sender.
 *
 * NCCL counterpart: src/transport/net_ib.cc: ncclIbListen, ncclIbConnect, ncclIbAccept,
 * ncclIbCreateQp, ncclIbRtrQp, ncclIbRtsQp, ncclIbCloseSend/Recv/Listen (newer NCCL makes the
 * same cut: src/transport/net_ib/connect.cc).
 * Added in: stage 6.
 */
#include "transport/net/ib/net_ib.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "tccl/common/bootstrap.h"
#include "transport/net/ib/net_ib_comm.h"

// The QP's transport timeout, 4.096 us x 2^TIMEOUT per try, and its retries (NCCL_IB_TIMEOUT,
// NCCL_IB_RETRY_CNT): a lost packet, a dead peer or a wrong GID fails after about
// TIMEOUT x RETRY_CNT tries, as a completion with status 12.
TCCL_PARAM(IbTimeout, "IB_TIMEOUT", 20)
TCCL_PARAM(IbRetryCnt, "IB_RETRY_CNT", 7)
// Service level (InfiniBand) and traffic class (RoCE) of the QPs (NCCL_IB_SL, NCCL_IB_TC).
TCCL_PARAM(IbSl, "IB_SL", 0)
TCCL_PARAM(IbTc, "IB_TC", 0)

namespace tccl {

struct IbListenComm : NetListenComm {
  Socket listener;
  uint64_t token = 0;
  int dev = 0;
};

namespace {

constexpr uint64_t kIbHandleMagic = 0x7cc11b0000000001ull;
constexpr uint64_t kIbInfoMagic = 0x7cc11b0000000002ull;

/// The listener's handle. The sender keeps its half-made comm in it between connect() calls.
struct IbNetHandle {
  uint64_t magic;
  uint64_t token;
  SocketAddress addr;     // the handshake socket
  IbSendComm* pending;    // sender only: the comm whose handshake is under way
};
static_assert(sizeof(IbNetHandle) <= sizeof(NetHandle), "IB handle too large");

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

}  // namespace tccl
