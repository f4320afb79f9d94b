/*
 * transport.cc: choosing a transport per peer, allocating FIFOs, and connecting at group end.
 *
 * What it is: the registration point for transports (stage 1 has one: NET/Socket; stage 5 puts
 * P2P and SHM in front, stage 6 IB) and the connection protocol, in five phases run across
 * every communicator of the group:
 *
 *   1. setup     each connector allocates its FIFO and fills its ConnectInfo
 *   2. exchange  each sends its info to the peer over the bootstrap and receives the peer's
 *   3. connect   send sides connect (TCP connects complete in the listener's backlog, so
 *                nobody needs the peer to be accepting yet)
 *   4. accept    receive sides accept and check the hellos
 *   5. finish    (stage 6) send sides whose handshake needs the receiver's answer (the verbs
 *                Net's QP numbers) take it: every receive side answered in phase 4
 *
 * Invariants: a connector is connected once for the communicator's life; tags are unique per
 * (channel, direction), so messages of different connectors never mix; on failure every
 * connector of the batch is freed and the error names the peer.
 *
 * NCCL counterpart: src/transport.cc (ncclTransportP2pSetup, selectTransport).
 * Added in: stage 1.
 */
#include "transport.h"

#include <cstdlib>

#include "comm_context.h"
#include "cuda_ipc.h"
#include "cuda_wrap.h"
#include "transport/p2p/p2p_transport.h"
#include "transport/net/net_transport.h"
#if TCCL_HAVE_IB
#include "transport/net/ib/net_ib.h"
#endif
#include "transport/shm/shm_transport.h"

namespace tccl {

namespace {

// Bootstrap tags used for connection info: base + 2*channel + (1 if sent by a receive side).
constexpr uint32_t kConnectTagBase = 0x10000;

P2pTransport p2pTransport;
ShmTransport shmTransport;
// Stage 6: the network is the network transport over a Net (transport/net/net.h): verbs
// where both ends have a device, else sockets.
#if TCCL_HAVE_IB
NetTransport ibTransport(ibNet(), kNetBitIb);
#endif
NetTransport socketTransport(socketNet(), kNetBitSocket);

// Preference order: the first transport that can reach a peer wins. P2P only serves kernels
// on one host, SHM any executor on one host, the network everything (as NCCL's
// ncclTransports: p2p, shm, net).
Transport* const kTransports[] = {&p2pTransport, &shmTransport,
#if TCCL_HAVE_IB
                                  &ibTransport,
#endif
                                  &socketTransport};

}  // namespace

uint32_t usableNets() {
  // Once per process: the devices do not change, and one INIT line says what the network is.
  static const uint32_t nets = [] {
    uint32_t mask = kNetBitSocket;
#if TCCL_HAVE_IB
    IbNet& ib = static_cast<IbNet&>(ibNet());
    if (ib.devices() > 0) {
      mask |= kNetBitIb;
      TCCL_INFO(kInit | kNet, "NET/IB: %d device(s): used between ranks that all have one",
                ib.devices());
    } else {
      TCCL_INFO(kInit | kNet, "NET/IB: not used (%s): the network is NET/Socket",
                ib.whyNone().c_str());
    }
#else
    TCCL_INFO(kInit | kNet, "NET/IB: not built (no infiniband/verbs.h at build time): the "
              "network is NET/Socket");
#endif
    return mask;
  }();
  return nets;
}

namespace {

uint32_t infoTag(int channel, bool fromSendSide) {
  return kConnectTagBase + 2 * uint32_t(channel) + (fromSendSide ? 0 : 1);
}

}  // namespace

Connector* ConnectorTable::get(int peer, int channel, bool isSend, bool forDevice) {
  auto& slot = map[ConnKey{peer, channel, isSend, forDevice}];
  if (!slot) {
    slot = std::make_unique<Connector>();
    slot->peer = peer;
    slot->channel = channel;
    slot->isSend = isSend;
    slot->forDevice = forDevice;
  }
  return slot.get();
}

tcclResult_t selectTransport(const CommContext& comm, int peer, bool forDevice, Transport** out) {
  for (Transport* t : kTransports) {
    if (t->canConnect(comm, comm.peers[peer], forDevice)) {
      *out = t;
      return tcclSuccess;
    }
  }
  TCCL_WARN("no transport can reach rank %d", peer);
  return tcclInternalError;
}

bool kernelsHaveLL(const CommContext& comm, int peer) {
  for (Transport* t : kTransports) {
    if (t->canConnect(comm, comm.peers[peer], /*forDevice=*/true)) return t->hasLL();
  }
  return false;
}

bool kernelsHaveLL128(const CommContext& comm, int peer) {
  for (Transport* t : kTransports) {
    if (t->canConnect(comm, comm.peers[peer], /*forDevice=*/true)) {
      return t->hasLL128(comm, comm.peers[peer]);
    }
  }
  return false;
}

tcclResult_t allocConnectorFifo(CommContext& comm, Connector& c, bool hostSlots) {
  const uint64_t stepBytes = uint64_t(tcclParamBuffSize()) / kNSteps;
  // One allocation: counters, the ConnInfo, then the slots on a page boundary (so 16-byte
  // vector copies into slots are aligned).
  const size_t header = kFifoHeaderBytes;
  static_assert(sizeof(ConnFifo) + sizeof(ConnInfo) <= kFifoHeaderBytes,
                "FIFO header must fit a page");
  const size_t bytes = header + (hostSlots ? kNSteps * stepBytes : 0);
  c.memMapped = comm.cudaDev >= 0;  // a kernel may drive this connector
  TCCL_CHECK(hostCalloc(&c.mem, bytes, c.memMapped));
  char* base = static_cast<char*>(c.mem);
  // With unified addressing a mapped host allocation has the same address on the GPU, so the
  // pointers stored here are valid for the host executor, the proxy and kernels alike.
  c.conn = reinterpret_cast<ConnInfo*>(base + sizeof(ConnFifo));
  c.conn->fifo = reinterpret_cast<ConnFifo*>(base);
  c.conn->buff = hostSlots ? base + header : nullptr;
  c.conn->stepBytes = stepBytes;
  c.conn->step = 0;
  c.conn->peer = c.peer;
  c.conn->channel = c.channel;
  return tcclSuccess;
}

tcclResult_t allocConnInfo(Connector& c) {
  // Plain host memory: only the host reads this copy; kernels read Connector::devConn, the
  // copy in GPU memory made once the connector is connected (transport.h).
  c.memMapped = false;
  TCCL_CHECK(hostCalloc(&c.mem, sizeof(ConnInfo), c.memMapped));
  c.conn = static_cast<ConnInfo*>(c.mem);
  c.conn->stepBytes = uint64_t(tcclParamBuffSize()) / kNSteps;
  c.conn->step = 0;
  c.conn->peer = c.peer;
  c.conn->channel = c.channel;
  return tcclSuccess;
}

namespace {
/// Where the LL slots start: after the Simple slots, on a page boundary.
size_t llOffset(uint64_t stepBytes) {
  return (kFifoHeaderBytes + kNSteps * stepBytes + 4095) / 4096 * 4096;
}
}  // namespace

size_t fifoBlockBytes(uint64_t stepBytes, bool withLL, bool withLL128) {
  if (!withLL) return kFifoHeaderBytes + kNSteps * stepBytes;
  return llOffset(stepBytes) + kLLBuffBytes + (withLL128 ? kLL128BuffBytes : 0);
}

void attachFifo(Connector& c, char* base, bool withLL128) {
  c.conn->fifo = reinterpret_cast<ConnFifo*>(base);
  c.conn->buff = base + kFifoHeaderBytes;
  // Stage 5: kernels' connectors carry LL slots too (the block was made for them: the same
  // forDevice on both sides). Zeroed with the block, so no line is valid before it is written.
  c.conn->llBuff = c.forDevice ? base + llOffset(c.conn->stepBytes) : nullptr;
  // LL128's slots follow LL's (a multiple of 16 bytes from a page boundary: 128-byte lines
  // stay aligned), where the transport made them (P2P).
  static_assert(kLLBuffBytes % 128 == 0, "LL128 lines must start 128-byte aligned");
  c.conn->ll128Buff = c.forDevice && withLL128 ? c.conn->llBuff + kLLBuffBytes : nullptr;
}

void freeConnectorFifo(Connector& c) {
  deviceFree(c.devConn);
  c.devConn = nullptr;
  hostFree(c.mem, c.memMapped);
  c.mem = nullptr;
  c.conn = nullptr;
}

/// A connector whose connection is complete: the kernels' ConnInfo in GPU memory
/// (transport.h says why), then connected.
static tcclResult_t finishConnector(Connector& c) {
  if (c.forDevice) {
    void* dev = nullptr;
    TCCL_CHECK(deviceCopyOf(&dev, c.conn, sizeof(ConnInfo)));
    c.devConn = static_cast<ConnInfo*>(dev);
  }
  c.connected = true;
  return tcclSuccess;
}

static tcclResult_t connectPhases(std::vector<PendingConnects>& pending,
                                  std::vector<std::vector<ConnectInfo>>& infos) {
  // Phase 1: setup. Each connector picks its transport and describes itself.
  for (size_t g = 0; g < pending.size(); g++) {
    CommContext& comm = *pending[g].comm;
    infos[g].resize(pending[g].conns.size());
    for (size_t i = 0; i < pending[g].conns.size(); i++) {
      Connector& c = *pending[g].conns[i];
      Transport* t = nullptr;
      TCCL_CHECK(selectTransport(comm, c.peer, c.forDevice, &t));
      c.transportComm = c.isSend ? &t->send() : &t->recv();
      // One line per connector, as NCCL's "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC".
      TCCL_INFO(kInit, "Channel %02d : %d %s %d via %s (%s)", c.channel, comm.rank,
                c.isSend ? "->" : "<-", c.peer, t->name(), c.forDevice ? "kernels" : "host");
      TCCL_CHECK(c.transportComm->setup(comm, c, &infos[g][i]));
    }
  }
  // Phase 2: exchange. Send everything first, then receive: sends never wait for the peer.
  for (size_t g = 0; g < pending.size(); g++) {
    CommContext& comm = *pending[g].comm;
    for (size_t i = 0; i < pending[g].conns.size(); i++) {
      Connector& c = *pending[g].conns[i];
      TCCL_CHECK(comm.bootstrap->send(c.peer, infoTag(c.channel, c.isSend), &infos[g][i],
                                      sizeof(ConnectInfo)));
    }
  }
  for (size_t g = 0; g < pending.size(); g++) {
    CommContext& comm = *pending[g].comm;
    for (size_t i = 0; i < pending[g].conns.size(); i++) {
      Connector& c = *pending[g].conns[i];
      // Our send side talks to the peer's receive side, and the other way round.
      TCCL_CHECK(comm.bootstrap->recv(c.peer, infoTag(c.channel, !c.isSend), &infos[g][i],
                                      sizeof(ConnectInfo)));
    }
  }
  // Phases 3 and 4: send sides connect, then receive sides accept.
  for (int phase = 0; phase < 2; phase++) {
    for (size_t g = 0; g < pending.size(); g++) {
      CommContext& comm = *pending[g].comm;
      for (size_t i = 0; i < pending[g].conns.size(); i++) {
        Connector& c = *pending[g].conns[i];
        if (c.isSend != (phase == 0)) continue;
        tcclResult_t res = c.transportComm->connect(comm, c, infos[g][i]);
        if (res != tcclSuccess) {
          TCCL_WARN("connecting to rank %d (channel %d, %s) failed", c.peer, c.channel,
                    c.isSend ? "send" : "recv");
          return res;
        }
        if (!c.isSend) TCCL_CHECK(finishConnector(c));
      }
    }
  }
  // Phase 5 (stage 6): send sides finish what connect() started; every receive side, on
  // every rank, has accepted by now or will without waiting for us (net_transport.h).
  for (size_t g = 0; g < pending.size(); g++) {
    CommContext& comm = *pending[g].comm;
    for (Connector* c : pending[g].conns) {
      if (!c->isSend) continue;
      tcclResult_t res = c->transportComm->finishConnect(comm, *c);
      if (res != tcclSuccess) {
        TCCL_WARN("connecting to rank %d (channel %d, send) failed", c->peer, c->channel);
        return res;
      }
      TCCL_CHECK(finishConnector(*c));
    }
  }
  return tcclSuccess;
}

tcclResult_t connectAll(std::vector<PendingConnects>& pending) {
  std::vector<std::vector<ConnectInfo>> infos(pending.size());
  tcclResult_t res = connectPhases(pending, infos);
  if (res == tcclSuccess) return res;
  // A failed connection leaves the communicator unusable (peers may hold half of it).
  for (auto& p : pending) {
    p.comm->setError(res);
    for (Connector* c : p.conns) {
      if (!c->connected) {
        // Leave nothing half-made: the next group end starts this connector from scratch.
        if (c->transportComm) c->transportComm->free(*c);
        c->transportComm = nullptr;
      }
    }
  }
  return res;
}

}  // namespace tccl
