/*
 * transport/p2p/p2p_transport.h: the P2P transport (GPU to GPU over NVLink or PCIe, or
 * between two processes on one GPU).
 *
 * What it is: a connection whose FIFO -- counters and slots -- lives in the receiving GPU's
 * memory. The receiver allocates it and exports it with CUDA IPC; the sender maps it, and
 * from then on the sender's thread blocks write the slots and publish tail with ordinary
 * stores that travel over NVLink (write mode, NCCL's default on Hopper), while the receiver's
 * blocks read the slots from their own memory and publish head, which the sender polls. No
 * proxy thread, no staging in host memory, no copy engine.
 *
 * Only connectors that serve kernels (Connector::forDevice) use this transport: a host
 * executor cannot dereference device memory, and a communicator's host-buffer calls get
 * their own connectors (SHM or the network).
 *
 * Setup, in the four phases of transport.cc:
 *   recv setup    cudaMalloc the FIFO block, export it (cudaIpcGetMemHandle) -> P2pRecvInfo
 *   send setup    this side's ConnInfo only                               -> P2pSendInfo
 *   send connect  cudaIpcOpenMemHandle the receiver's block; point the ConnInfo into it
 *   recv connect  check the sender's geometry
 * Two ranks of one process (tcclCommInitAll) cannot IPC-open their own memory: the receiver
 * then passes the plain pointer, and the sender uses it as is.
 *
 * Invariants: both sides agree on stepBytes (checked); the block stays allocated until the
 * receive side is freed at commDestroy, after this rank's last kernel has finished; a correct
 * program's sender has stopped touching it by then (its last step was consumed by that
 * kernel), and only unmaps it when it is destroyed in turn.
 *
 * Difference from NCCL: NCCL keeps the head counter in the sender's memory (each side polls
 * only local memory); here both counters sit in the receiver's block, so the sender polls
 * head across the link. On one GPU that is the same memory; across NVLink it costs a read
 * per poll. (NCCL: src/transport/p2p.cc, the sendMem/recvMem split.)
 *
 * NCCL counterpart: src/transport/p2p.cc (p2pCanConnect, p2pSendSetup/Connect,
 * p2pRecvSetup/Connect, P2P/IPC and P2P/direct pointer).
 * Added in: stage 5.
 */
#ifndef TCCL_TRANSPORT_P2P_P2P_TRANSPORT_H_
#define TCCL_TRANSPORT_P2P_P2P_TRANSPORT_H_

#include "cuda_ipc.h"
#include "transport.h"

namespace tccl {

/// What the receive side tells the sender: how to reach its FIFO block.
struct P2pRecvInfo {
  IpcHandle handle;    // the block, exported (another process)
  uint64_t directPtr;  // the block's address (the same process: no IPC needed)
  uint64_t stepBytes;
  int32_t rank;
  int32_t pid;
};

/// What the send side tells the receiver: its geometry.
struct P2pSendInfo {
  uint64_t stepBytes;
  int32_t rank;
  int32_t pid;
};

class P2pSendComm : public TransportComm {
 public:
  tcclResult_t setup(CommContext& comm, Connector& c, ConnectInfo* info) override;
  tcclResult_t connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) override;
  void free(Connector& c) override;
};

class P2pRecvComm : public TransportComm {
 public:
  tcclResult_t setup(CommContext& comm, Connector& c, ConnectInfo* info) override;
  tcclResult_t connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) override;
  void free(Connector& c) override;
};

class P2pTransport : public Transport {
 public:
  const char* name() const override { return "P2P/IPC"; }
  bool hasLL() const override { return true; }
  /// A connector for kernels, both ranks on one host with a GPU each, and our GPU can write
  /// into the peer's (the same GPU, or peer access); TCCL_P2P_DISABLE unset.
  bool canConnect(const CommContext& comm, const PeerInfo& peer, bool forDevice) const override;
  /// LL128 slots (device/prims_ll128.h) to a peer on another GPU joined to ours by NVLink.
  bool hasLL128(const CommContext& comm, const PeerInfo& peer) const override;
  TransportComm& send() override { return send_; }
  TransportComm& recv() override { return recv_; }

 private:
  P2pSendComm send_;
  P2pRecvComm recv_;
};

}  // namespace tccl

#endif  // TCCL_TRANSPORT_P2P_P2P_TRANSPORT_H_
