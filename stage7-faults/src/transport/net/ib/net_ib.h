/*
 * transport/net/ib/net_ib.h: the verbs Net -- messages over InfiniBand or RoCE.
 *
 * What it is: the Net (net.h) over reliable-connected queue pairs, as NCCL's net_ib:
 *
 *   objects     per device (an HCA port): the context and a protection domain (PD); per
 *               connection: a completion queue (CQ) and an RC queue pair (QP); memory regions
 *               (MR) for what the NIC reads or writes: the FIFO slots (regMr, once per
 *               connection) and the ready-to-receive FIFO.
 *   handshake   the receiver listens on a TCP socket whose address is the handle (sent over the
 *               bootstrap); the sender connects and sends its IbQpInfo -- QP number, LID, GID
 *               and its index, MTU, link layer, and where its ready-to-receive FIFO is (address
 *               and rkey); the receiver answers with its own. Each side then walks its QP
 *               through RESET -> INIT -> RTR (ready to receive: it now knows the peer's QP)
 *               -> RTS (ready to send). The receiver gets there first (it has the sender's
 *               description before it answers), so the sender's last word is one "ready"
 *               byte: the receiver posts nothing before it (a write into a QP still in INIT
 *               is dropped, and retried only after a timeout). The socket stays open: its
 *               clean close is how a receive learns that the peer is gone (kNetClosed).
 *   data        the receiver posts a receive work request, then writes a ready-to-receive
 *               entry {address, rkey, size, sequence} into the sender's FIFO with an RDMA
 *               write. The sender's isend waits for the entry of its next message (that is the
 *               flow control: no entry, no send -- isend returns no request) and RDMA-writes
 *               the data straight into the receiver's buffer WITH IMMEDIATE: the 32-bit
 *               immediate carries the size and consumes the posted receive, whose completion
 *               tells the receiver the bytes are there.
 *   errors      a work completion that is not a success is reported with the peer, the QP and
 *               the status in words (status 12, "transport retry counter exceeded", is what a
 *               wrong GID index or a dead peer gives after TCCL_IB_TIMEOUT x TCCL_IB_RETRY_CNT).
 *
 * GID (RoCE): TCCL_IB_GID_INDEX, or the first RoCE v2 GID holding an IPv4 address, then any
 * RoCE v2 GID that is not link-local, then RoCE v1. Devices: TCCL_IB_HCA, NCCL's syntax
 * ("mlx5_0:1,mlx5_1", "^mlx5_2" excludes, "=" matches names exactly).
 *
 * Invariants: a sender never writes to a receive buffer the receiver has not announced; the
 * k-th write carries message k (RC keeps order, and both sides count); a message larger than
 * the announced buffer is written as zero bytes with its true size (net.h's rule); only host
 * memory is registered by default. GPUDirect RDMA (ibv_reg_dmabuf_mr, regMrDmaBuf) is an
 * opt-in of the network transport (TCCL_NET_GDR_ENABLE, gdr.h); this Net's half of the probe
 * is per device, at start: a registration of nothing that fails for want of support
 * (EOPNOTSUPP, as on Soft-RoCE) rather than for the bad descriptor it was given.
 *
 * NCCL counterpart: src/transport/net_ib.cc (ncclIbListen/Connect/Accept, ncclIbIsend,
 * ncclIbPostFifo, ncclIbTest, ncclIbGetGidIndex), src/misc/ibvwrap.cc.
 * Added in: stage 6.
 */
#ifndef TCCL_TRANSPORT_NET_IB_NET_IB_H_
#define TCCL_TRANSPORT_NET_IB_NET_IB_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/net/ib/ibvwrap.h"
#include "transport/net/net.h"

namespace tccl {

/// One usable HCA port.
struct IbDevice {
  std::string name;  // "mlx5_0", "rxe0"
  uint8_t port = 1;
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;      // shared by the device's ports' connections
  ibv_port_attr portAttr{};
  bool roce = false;         // link layer Ethernet
  int gidIndex = 0;
  ibv_gid gid{};
  GidType gidType = GidType::kUnknown;
  bool dmabuf = false;       // ibv_reg_dmabuf_mr works here (the verbs half of the GDR probe)
  int speedMbps = 0;         // the port's active speed x width
};

/// What each side of a connection tells the other over the handshake socket.
struct IbQpInfo {
  uint64_t magic;
  uint64_t token;      // the listener's: proves the sender got the handle
  uint32_t qpn;
  uint16_t lid;        // InfiniBand: the port's LID (RoCE: 0)
  uint8_t linkLayer;   // IBV_LINK_LAYER_INFINIBAND or _ETHERNET
  uint8_t mtu;         // enum ibv_mtu: the port's active MTU
  int32_t gidIndex;
  uint8_t gid[16];
  uint64_t fifoAddr;   // sender: its ready-to-receive FIFO, which the receiver writes
  uint32_t fifoRkey;
  uint32_t pad;
};

/// Checks an IbQpInfo from a peer (exposed for tests): magic, token, an MTU
/// verbs knows, a link layer, and a FIFO for the side that needs one.
tcclResult_t checkIbQpInfo(const IbQpInfo& info, uint64_t token, bool fromSender);

/// TCCL_IB_HCA: does `spec` select port `port` of device `name`? (Exposed for tests.)
bool ibHcaSelected(const std::string& spec, const std::string& name, int port);

/// The GID this port should use (TCCL_IB_GID_INDEX when >= 0), or -1 when it has none usable.
/// (Exposed for tests, which give it a fake's GID table.)
int ibChooseGid(const IbvApi& api, ibv_context* context, uint8_t port, int tableLen,
                int64_t forced);

class IbNet : public Net {
 public:
  /// A Net over `api` (a test's fake), or, with none, over libibverbs, loaded at first use
  /// (ibNet()); `whyNoApi` instead says why there is no verbs at all.
  explicit IbNet(const IbvApi* api, std::string whyNoApi = "");
  ~IbNet() override;
  const char* name() const override { return "IB"; }
  int devices() const override;
  /// Why there is no device (no library, no active port, TCCL_IB_DISABLE...), for INIT logs.
  std::string whyNone() const;
  const IbDevice& device(int dev) const { return devs_[size_t(dev)]; }
  const IbvApi& api() const { return api_; }

  tcclResult_t getProperties(int dev, NetProperties* props) const override;
  tcclResult_t listen(int dev, NetHandle* handle, NetListenComm** listenComm) override;
  tcclResult_t connect(int dev, NetHandle* handle, NetSendComm** sendComm) override;
  tcclResult_t accept(NetListenComm* listenComm, NetRecvComm** recvComm) override;
  void abandonConnect(NetHandle* handle) override;
  tcclResult_t regMr(NetSendComm* sendComm, NetRecvComm* recvComm, void* data, size_t size,
                     NetMemType type, NetMr** mhandle) override;
  /// GPUDirect RDMA: a GPU range by dma-buf (ibv_reg_dmabuf_mr), where the probe said yes.
  tcclResult_t regMrDmaBuf(NetSendComm* sendComm, NetRecvComm* recvComm, void* data, size_t size,
                           uint64_t offset, int fd, NetMr** mhandle) override;
  tcclResult_t deregMr(NetSendComm* sendComm, NetRecvComm* recvComm, NetMr* mhandle) override;
  tcclResult_t isend(NetSendComm* comm, void* data, size_t size, NetMr* mhandle,
                     NetRequest** request) override;
  tcclResult_t irecv(NetRecvComm* comm, void* data, size_t size, NetMr* mhandle,
                     NetRequest** request) override;
  tcclResult_t iflush(NetRecvComm*, void*, size_t, NetMr*, NetRequest** request) override {
    // Nothing for the Net to do: the network transport makes GPUDirect writes visible with
    // CUDA's flush (gdr.h). NCCL's IB Net reads a byte back through a loopback QP instead.
    *request = nullptr;
    return tcclSuccess;
  }
  tcclResult_t test(NetRequest* request, bool* done, size_t* size) override;
  tcclResult_t closeSend(NetSendComm* comm) override;
  tcclResult_t closeRecv(NetRecvComm* comm) override;
  tcclResult_t closeListen(NetListenComm* comm) override;
  // pollFd: none (the default, -1): completions and ready-to-receive entries are polled.

 private:
  void init() const;  // finds the devices, once
  mutable IbvApi api_{};
  mutable bool haveApi_ = false;
  bool loadLibrary_ = false;  // no api given and no reason: load libibverbs in init()
  mutable std::once_flag once_;
  mutable std::vector<IbDevice> devs_;
  mutable std::string why_;
};

}  // namespace tccl

#endif  // TCCL_TRANSPORT_NET_IB_NET_IB_H_
