/*
 * transport/net/ib/net_ib.cc: the verbs Net's data path -- memory registration, irecv and
 * isend over the ready-to-receive FIFO, test -- and the process's IB Net. See net_ib.h for the
 * picture; net_ib_connect.cc makes the connections this file uses, ib_device.cc finds the
 * devices.
 *
 * What it is: irecv posts a receive work request, then RDMA-writes a ready-to-receive entry
 * {addr, rkey, size, seq} into the sender's FIFO slot for that message; isend waits for the
 * entry (readFifoEntry: no entry, no request) and RDMA-writes the data with the size as the
 * immediate, which consumes the posted receive; test polls the connection's CQ
 * (pollCompletions) until the request's completions are in, or the peer has closed. iflush
 * has nothing to do (inline in net_ib.h).
 *
 * Invariants: message k uses request slot, FIFO entry and posted receive k mod
 * kIbMaxRequests, and both sides count k alike (RC keeps order); a receive is posted before
 * its entry is written, so a write never finds the receive queue empty; nothing is written to
 * the sender before its "ready" byte; a failed completion of a receive whose peer has closed
 * its socket is the connection's end (kNetClosed), any other is an error that names the peer,
 * the QP and the status in words.
 *
 * NCCL counterpart: src/transport/net_ib.cc: ncclIbRegMr, ncclIbRegMrDmaBuf, ncclIbDeregMr,
 * ncclIbIsend, ncclIbIrecv + ncclIbPostFifo, ncclIbTest (newer NCCL makes the same cut:
 * src/transport/net_ib/p2p.cc, reg.cc).
 * Added in: stage 6.
 */
#include "transport/net/ib/net_ib.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "tccl/common/trace.h"
#include "transport/net/ib/net_ib_comm.h"

namespace tccl {

// A registration: net.h's NetMr under a name of its own (net_ib_comm.h says why).
struct IbMr : NetMr {
  explicit IbMr(ibv_mr* m) : mr(m) {}
  ibv_mr* mr;
};

namespace {

constexpr int kIbPollBatch = 16;
constexpr uint64_t kIbPeekIntervalNs = 10'000'000;  // how often a waiting receive looks for a close

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
  // >>> exercise 6.2: the sender reads its ready-to-receive entry
  // The receiver RDMA-writes entry k with seq = k + 1, last: an entry from an earlier lap of
  // the ring holds an older seq. Acquire: the fields written before seq are read after it.
  *ready = __atomic_load_n(&e.seq, __ATOMIC_ACQUIRE) == k + 1;
  // Larger than the buffer announced: no byte is written, the immediate still says the size,
  // and the receiver's consumer reports the mismatch.
  *bytes = size <= e.size ? uint32_t(size) : 0;
  return tcclSuccess;
  // <<< exercise 6.2
}

}  // namespace

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
    // its "ready" byte (IbNet::connect, net_ib_connect.cc). Until then, no receive: call again.
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

Net& ibNet() {
  // Never freed (as NCCL's): communicators may outlive main's statics. libibverbs is opened
  // at its first use (IbNet::init).
  static IbNet* net = new IbNet(nullptr);
  return *net;
}

}  // namespace tccl
