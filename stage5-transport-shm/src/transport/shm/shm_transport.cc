/*
 * transport/shm/shm_transport.cc: setup and connect of the shared-memory transport.
 *
 * What it is: the four steps of shm_transport.h. There is no progress function: once
 * connected, the executors move every byte themselves.
 *
 * NCCL counterpart: src/transport/shm.cc.
 * Added in: stage 5.
 */
#include "transport/shm/shm_transport.h"

#include <unistd.h>

#include <cstdio>

#include "comm_context.h"
#include "cuda_ipc.h"
#include "tccl/common/bootstrap.h"
#include "transport/shm/peer_watch.h"

TCCL_PARAM(ShmDisable, "SHM_DISABLE", 0)

namespace tccl {

namespace {

constexpr uint64_t kShmHelloMagic = 0x7cc15e6d5e6d0001ull;

/// What one connector of this transport holds.
struct ShmResources : ConnectorResources {
  ShmSegment segment;
  FdListener listener;      // receive side, until connected
  bool registered = false;  // the segment is registered with CUDA (a connector for kernels)
  ~ShmResources() override {
    if (registered) hostUnregister(segment.base);
    shmUnmap(&segment);
    fdClose(&listener);
  }
};

ShmResources& res(Connector& c) { return *static_cast<ShmResources*>(c.resources.get()); }

/// Makes the segment the connector's FIFO; registers it for kernels when they will use it;
/// has the peer watched (peer_watch.h): its death would otherwise go unnoticed.
tcclResult_t attachSegment(CommContext& comm, Connector& c, pid_t peerPid) {
  ShmResources& r = res(c);
  if (c.forDevice) {
    TCCL_CHECK(hostRegister(r.segment.base, r.segment.bytes));
    r.registered = true;
  }
  attachFifo(c, static_cast<char*>(r.segment.base));
  if (!comm.peerWatch) comm.peerWatch = std::make_unique<PeerWatch>();
  if (peerPid > 0) comm.peerWatch->watch(c.peer, peerPid, c.conn->fifo);
  return tcclSuccess;
}

}  // namespace

size_t shmSegmentBytes(uint64_t stepBytes, bool forDevice) {
  return fifoBlockBytes(stepBytes, /*withLL=*/forDevice);
}

bool ShmTransport::canConnect(const CommContext& comm, const PeerInfo& peer, bool) const {
  // Same host: same hostHash (bootstrap's host identity). Two processes on one host share
  // memory unless they sit in different IPC namespaces -- then fdSend fails with a message.
  return tcclParamShmDisable() == 0 && peer.hostHash == comm.peers[comm.rank].hostHash;
}

// ---- Send side: creates the segment ----------------------------------------------------------

tcclResult_t ShmSendComm::setup(CommContext& comm, Connector& c, ConnectInfo* info) {
  TCCL_CHECK(allocConnInfo(c));
  c.resources = std::make_unique<ShmResources>();
  char what[64];
  snprintf(what, sizeof(what), "tccl-fifo-%d-to-%d-ch%d", comm.rank, c.peer, c.channel);
  const size_t bytes = shmSegmentBytes(c.conn->stepBytes, c.forDevice);
  TCCL_CHECK(shmCreate(bytes, what, &res(c).segment));
  ShmSendInfo mine{c.conn->stepBytes, bytes, comm.rank, 0};
  packInfo(TransportId::kShm, mine, info);
  return tcclSuccess;
}

tcclResult_t ShmSendComm::connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) {
  ShmRecvInfo peer;
  TCCL_CHECK(unpackInfo(TransportId::kShm, peerInfo, &peer));
  if (peer.stepBytes != c.conn->stepBytes || peer.rank != c.peer) {
    TCCL_WARN("SHM connection info from rank %d does not match (step %llu bytes, ours %llu)",
              peer.rank, (unsigned long long)peer.stepBytes, (unsigned long long)c.conn->stepBytes);
    return tcclRemoteError;
  }
  ShmResources& r = res(c);
  ShmHello hello{kShmHelloMagic, comm.bootstrap->secret(), r.segment.bytes, comm.rank, c.channel};
  pid_t peerPid = 0;
  TCCL_CHECK(fdSend(peer.socket, r.segment.fd, &hello, sizeof(hello), &peerPid));
  // The receiver holds its own descriptor now (or will, from the socket's queue); ours is not
  // needed: from here the segment is only mappings.
  close(r.segment.fd);
  r.segment.fd = -1;
  return attachSegment(comm, c, peerPid);
}

void ShmSendComm::free(Connector& c) {
  c.resources.reset();  // unregisters and unmaps
  freeConnectorFifo(c);
}

// ---- Receive side: maps the sender's segment --------------------------------------------------

tcclResult_t ShmRecvComm::setup(CommContext& comm, Connector& c, ConnectInfo* info) {
  TCCL_CHECK(allocConnInfo(c));
  c.resources = std::make_unique<ShmResources>();
  ShmRecvInfo mine{};
  TCCL_CHECK(fdListen(&res(c).listener));
  mine.socket = res(c).listener.name;
  mine.stepBytes = c.conn->stepBytes;
  mine.rank = comm.rank;
  packInfo(TransportId::kShm, mine, info);
  return tcclSuccess;
}

tcclResult_t ShmRecvComm::connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) {
  ShmSendInfo peer;
  TCCL_CHECK(unpackInfo(TransportId::kShm, peerInfo, &peer));
  const size_t want = shmSegmentBytes(c.conn->stepBytes, c.forDevice);
  if (peer.stepBytes != c.conn->stepBytes || peer.segmentBytes != want || peer.rank != c.peer) {
    TCCL_WARN("SHM connection info from rank %d does not match (step %llu bytes, ours %llu)",
              peer.rank, (unsigned long long)peer.stepBytes, (unsigned long long)c.conn->stepBytes);
    return tcclRemoteError;
  }
  ShmResources& r = res(c);
  // The sender sent in its connect phase, which ran before ours; wait as long as the
  // bootstrap would for a slow peer.
  int fd = -1;
  pid_t peerPid = 0;
  ShmHello hello{};
  TCCL_CHECK(fdAccept(&r.listener, int(bootstrapTimeoutSeconds() * 1000), &fd, &hello,
                      sizeof(hello), &peerPid));
  fdClose(&r.listener);
  if (hello.magic != kShmHelloMagic || hello.secret != comm.bootstrap->secret() ||
      hello.rank != c.peer || hello.channel != c.channel || hello.segmentBytes != want) {
    close(fd);
    TCCL_WARN("SHM socket: a hello that is not from rank %d channel %d of this communicator",
              c.peer, c.channel);
    return tcclRemoteError;
  }
  TCCL_CHECK(shmMapFd(fd, want, &r.segment));
  return attachSegment(comm, c, peerPid);
}

void ShmRecvComm::free(Connector& c) {
  c.resources.reset();
  freeConnectorFifo(c);
}

}  // namespace tccl
