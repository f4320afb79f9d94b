/*
 * transport/p2p/p2p_transport.cc: setup and connect of the P2P transport (p2p_transport.h).
 *
 * What it is: the four steps that give the sender's kernels a pointer into the receiver's
 * FIFO block. There is no progress function: the kernels move every byte.
 *
 * NCCL counterpart: src/transport/p2p.cc.
 * Added in: stage 5.
 */
#include "transport/p2p/p2p_transport.h"

#include <cstring>

#include <unistd.h>

#include "comm_context.h"

TCCL_PARAM(P2pDisable, "P2P_DISABLE", 0)

namespace tccl {

namespace {

struct P2pResources : ConnectorResources {
  void* block = nullptr;  // receive side: our cudaMalloc; send side: the peer's, mapped
  bool opened = false;    // send side: mapped with cudaIpcOpenMemHandle (not a direct pointer)
  bool owned = false;     // receive side: we allocated it
  ~P2pResources() override {
    if (opened) ipcClose(block);
    if (owned) deviceFree(block);
  }
};

P2pResources& res(Connector& c) { return *static_cast<P2pResources*>(c.resources.get()); }

}  // namespace

bool P2pTransport::canConnect(const CommContext& comm, const PeerInfo& peer, bool forDevice) const {
  if (!forDevice || tcclParamP2pDisable() != 0) return false;
  const PeerInfo& me = comm.peers[comm.rank];
  if (me.hostHash != peer.hostHash || comm.cudaDev < 0 || peer.cudaDev < 0) return false;
  // The bus id names the GPU the same way in every process (device ordinals depend on each
  // process's CUDA_VISIBLE_DEVICES).
  if (!canAccessPeer(comm.cudaDev, peer.busId)) {
    TCCL_INFO(kInit, "P2P: GPU %s cannot access GPU %s of rank %d: falling back", me.busId,
              peer.busId, peer.rank);
    return false;
  }
  return true;
}

bool P2pTransport::hasLL128(const CommContext& comm, const PeerInfo& peer) const {
  // Two ranks on one GPU meet in its L2, which promises nothing about 128-byte lines.
  return strcmp(comm.peers[comm.rank].busId, peer.busId) != 0 && nvlinkPeer(comm.cudaDev, peer.busId);
}

// ---- Receive side: owns the FIFO block --------------------------------------------------------

tcclResult_t P2pRecvComm::setup(CommContext& comm, Connector& c, ConnectInfo* info) {
  TCCL_CHECK(allocConnInfo(c));
  c.resources = std::make_unique<P2pResources>();
  P2pResources& r = res(c);
  // With LL128's slots always: their lines are only written where the planner chose LL128
  // (hasLL128), but both sides must agree on the block's layout without asking.
  TCCL_CHECK(deviceCalloc(&r.block, fifoBlockBytes(c.conn->stepBytes, /*withLL=*/true,
                                                   /*withLL128=*/true)));
  r.owned = true;
  P2pRecvInfo mine{};
  TCCL_CHECK(ipcExport(r.block, &mine.handle));
  mine.directPtr = reinterpret_cast<uint64_t>(r.block);
  mine.stepBytes = c.conn->stepBytes;
  mine.rank = comm.rank;
  mine.pid = int32_t(getpid());
  // Our kernels read the slots and the tail from the block, and write head there.
  attachFifo(c, static_cast<char*>(r.block), /*withLL128=*/true);
  packInfo(TransportId::kP2p, mine, info);
  return tcclSuccess;
}

tcclResult_t P2pRecvComm::connect(CommContext&, Connector& c, const ConnectInfo& peerInfo) {
  P2pSendInfo peer;
  TCCL_CHECK(unpackInfo(TransportId::kP2p, peerInfo, &peer));
  if (peer.stepBytes != c.conn->stepBytes || peer.rank != c.peer) {
    TCCL_WARN("P2P connection info from rank %d does not match (step %llu bytes, ours %llu)",
              peer.rank, (unsigned long long)peer.stepBytes, (unsigned long long)c.conn->stepBytes);
    return tcclRemoteError;
  }
  return tcclSuccess;
}

void P2pRecvComm::free(Connector& c) {
  c.resources.reset();
  freeConnectorFifo(c);
}

// ---- Send side: maps the receiver's block ------------------------------------------------------

tcclResult_t P2pSendComm::setup(CommContext& comm, Connector& c, ConnectInfo* info) {
  TCCL_CHECK(allocConnInfo(c));
  c.resources = std::make_unique<P2pResources>();
  P2pSendInfo mine{c.conn->stepBytes, comm.rank, int32_t(getpid())};
  packInfo(TransportId::kP2p, mine, info);
  return tcclSuccess;
}

tcclResult_t P2pSendComm::connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) {
  P2pRecvInfo peer;
  TCCL_CHECK(unpackInfo(TransportId::kP2p, peerInfo, &peer));
  if (peer.stepBytes != c.conn->stepBytes || peer.rank != c.peer) {
    TCCL_WARN("P2P connection info from rank %d does not match (step %llu bytes, ours %llu)",
              peer.rank, (unsigned long long)peer.stepBytes, (unsigned long long)c.conn->stepBytes);
    return tcclRemoteError;
  }
  P2pResources& r = res(c);
  if (peer.pid == int32_t(getpid())) {
    // The same process (and address space): CUDA refuses to IPC-open our own allocation, and
    // the pointer is valid here as it is (peer access was enabled by canConnect).
    r.block = reinterpret_cast<void*>(peer.directPtr);
  } else {
    TCCL_CHECK(ipcOpen(peer.handle, &r.block));
    r.opened = true;
  }
  // Our kernels write the slots, sizes and tail into the peer's block, and poll its head.
  attachFifo(c, static_cast<char*>(r.block), /*withLL128=*/true);
  // Two ranks on one GPU: the receiving kernel runs on our GPU, so our kernels may publish
  // steps with a GPU-scope release (fifo.h, device_backend.cuh).
  c.conn->gpuScope = strcmp(comm.peers[c.peer].busId, comm.peers[comm.rank].busId) == 0;
  return tcclSuccess;
}

void P2pSendComm::free(Connector& c) {
  c.resources.reset();
  freeConnectorFifo(c);
}

}  // namespace tccl
