/*
 * transport.h: what a transport is, and the connector it fills.
 *
 * What it is: a transport moves FIFO slots between two ranks. Each has a send side and a
 * receive side (TransportComm), each with the same four steps, as in NCCL:
 *
 *   setup    allocate the FIFO and local resources; fill a ConnectInfo for the peer
 *   connect  given the peer's ConnectInfo, finish the connection (stage 6: a send side whose
 *            handshake needs the receiver's answer finishes in finishConnect, once every
 *            receive side has accepted)
 *   free     release everything (also after a failed connect)
 *   progress (optional) move data on the proxy thread; transports whose executor reaches the
 *            peer's memory directly (SHM, P2P, stage 5) have none
 *
 * ConnectInfo is a fixed-size envelope carried over the bootstrap; each transport puts its own
 * typed struct in it (packInfo / unpackInfo check the size and the transport id).
 *
 * Invariants: a Connector is connected at most once and freed exactly once; its ConnInfo is
 * the executor's only view of it; a progress function never blocks.
 *
 * NCCL counterpart: src/include/transport.h (ncclTransport, ncclTransportComm, ncclConnect),
 * src/include/comm.h (ncclConnector).
 * Added in: stage 1.
 */
#ifndef TCCL_TRANSPORT_H_
#define TCCL_TRANSPORT_H_

#include <poll.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core.h"
#include "device/fifo.h"

namespace tccl {

struct CommContext;
struct PeerInfo;
class TransportComm;

/// Which transport a connector uses; the id travels in ConnectInfo so a mismatch is caught.
/// (Stage 6: kNet, the network transport over any Net, keeps the id of stage 5's kSocket.)
enum class TransportId : uint32_t { kNet = 1, kShm = 2, kP2p = 3 };

/// The envelope exchanged between the two sides during connection setup.
struct ConnectInfo {
  uint32_t transport;  // TransportId
  uint32_t size;       // bytes of payload in use
  uint8_t payload[248];
};
static_assert(sizeof(ConnectInfo) == 256, "ConnectInfo is exchanged as a fixed-size message");

template <typename T>
void packInfo(TransportId id, const T& in, ConnectInfo* out) {
  static_assert(sizeof(T) <= sizeof(ConnectInfo::payload), "transport info too large");
  memset(out, 0, sizeof(*out));
  out->transport = uint32_t(id);
  out->size = sizeof(T);
  memcpy(out->payload, &in, sizeof(T));
}

/// Validates and extracts a transport's info: bytes from another process are not trusted.
template <typename T>
tcclResult_t unpackInfo(TransportId id, const ConnectInfo& in, T* out) {
  if (in.transport != uint32_t(id) || in.size != sizeof(T)) {
    TCCL_WARN("connection info mismatch: transport %u size %u, expected transport %u size %zu",
              in.transport, in.size, uint32_t(id), sizeof(T));
    return tcclRemoteError;
  }
  memcpy(out, in.payload, sizeof(T));
  return tcclSuccess;
}

/// Transport-specific state of one connector (sockets, progress state...).
class ConnectorResources {
 public:
  virtual ~ConnectorResources() = default;
};

/// One direction of one connection to one peer on one channel, as ncclConnector.
struct Connector {
  int peer = -1;
  int channel = 0;
  bool isSend = false;
  // Serves kernels (device buffers) rather than host executors (stage 5): a communicator with
  // a GPU keeps the two kinds apart, because only kernels can use a FIFO in GPU memory (P2P).
  bool forDevice = false;
  bool connected = false;
  TransportComm* transportComm = nullptr;
  ConnInfo* conn = nullptr;        // the executor's view; inside `mem`
  // Stage 5: the kernels' copy of *conn, in GPU memory, made by connectPhases (transport.cc)
  // once the connector is connected; null for host connectors. A kernel reads its ConnInfo
  // at every step: through a host mapping each read would be a PCIe round trip of a microsecond,
  // from GPU memory it is a cache hit. Only kernels advance this copy's step, so the host
  // copy's goes stale: the host reads nothing but the pointers and sizes, which never change.
  ConnInfo* devConn = nullptr;
  void* mem = nullptr;             // FIFO counters + slots, one allocation
  bool memMapped = false;          // pinned + mapped for the GPU
  std::unique_ptr<ConnectorResources> resources;
};

/// Key of a connector: (peer, channel, direction, and whether it serves kernels: stage 5).
struct ConnKey {
  int peer;
  int channel;
  bool isSend;
  bool forDevice;
  bool operator<(const ConnKey& o) const {
    return std::tie(peer, channel, isSend, forDevice) <
           std::tie(o.peer, o.channel, o.isSend, o.forDevice);
  }
};

/// A communicator's connectors, created on first use (by the planners) and kept for the
/// communicator's life; the map owns them.
struct ConnectorTable {
  std::map<ConnKey, std::unique_ptr<Connector>> map;
  /// The connector to `peer` on `channel` in one direction, for kernels (forDevice) or host
  /// executors: a communicator with a GPU keeps the two apart (Connector::forDevice).
  Connector* get(int peer, int channel, bool isSend, bool forDevice);
  auto begin() { return map.begin(); }
  auto end() { return map.end(); }
};

/// One direction of a transport.
class TransportComm {
 public:
  virtual ~TransportComm() = default;
  virtual tcclResult_t setup(CommContext& comm, Connector& c, ConnectInfo* info) = 0;
  virtual tcclResult_t connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) = 0;
  /// Stage 6, send side: completes a connection that connect() started (net_transport.cc).
  virtual tcclResult_t finishConnect(CommContext& comm, Connector& c) { return tcclSuccess; }
  virtual void free(Connector& c) = 0;
  /// True when the proxy thread must call progress() for this connector.
  virtual bool needsProxy() const { return false; }
  /// Moves what can be moved now, without blocking. Sets *didWork when anything moved.
  virtual tcclResult_t progress(CommContext& comm, Connector& c, bool* didWork) {
    return tcclSuccess;
  }
  /// The fd (and events) the proxy may sleep on for this connector; -1 when none.
  virtual int pollFd(const Connector& c, short* events) const { return -1; }
  /// Stage 6: work is in flight that no fd announces (verbs completions are polled): the
  /// engine may sleep at most this many microseconds before it looks again (0: not at all);
  /// -1 when the fds say everything.
  virtual int pollWithinUs(const Connector& c) const { return -1; }
};

/// A transport: a name, a test for whether it can reach a peer, and its two directions.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  /// Can this transport connect us to `peer` for a connector that serves kernels
  /// (forDevice) or host executors?
  virtual bool canConnect(const CommContext& comm, const PeerInfo& peer, bool forDevice) const = 0;
  /// Stage 5: its kernels' connectors carry LL slots (the kernels write and poll them; a
  /// network transport would need its proxy to, as NCCL's does).
  virtual bool hasLL() const { return false; }
  /// Stage 5: whether its device connectors to `peer` carry LL128 slots whose 128-byte lines
  /// arrive whole (P2P over NVLink: fifo.h).
  virtual bool hasLL128(const CommContext&, const PeerInfo&) const { return false; }
  virtual TransportComm& send() = 0;
  virtual TransportComm& recv() = 0;
};

/// Stage 6: the Nets a rank can use, as a mask in its PeerInfo: a connection uses a Net only
/// when both ends have it.
constexpr uint32_t kNetBitSocket = 1u << 0;
constexpr uint32_t kNetBitIb = 1u << 1;
/// This process's Nets (logs once, under INIT, why verbs are not among them).
uint32_t usableNets();

/// The transports, in order of preference: P2P, SHM, then the network (stage 5; stage 6:
/// NET/IB before NET/Socket). selectTransport returns the first whose canConnect() says yes.
tcclResult_t selectTransport(const CommContext& comm, int peer, bool forDevice, Transport** out);

/// Stage 5: whether the transport that selectTransport would pick for kernels' connectors to
/// `peer` carries LL slots.
bool kernelsHaveLL(const CommContext& comm, int peer);
/// Stage 5: ... and LL128 slots (Transport::hasLL128).
bool kernelsHaveLL128(const CommContext& comm, int peer);

/// Allocates a connector's FIFO: counters, ConnInfo and kNSteps slots, in one block of host
/// memory (pinned and mapped when the communicator has a GPU). Used by every transport's setup.
/// Stage 6: `hostSlots` false leaves the slots out (conn->buff null): the network transport's
/// GPUDirect RDMA receive slots live in GPU memory.
tcclResult_t allocConnectorFifo(CommContext& comm, Connector& c, bool hostSlots = true);
void freeConnectorFifo(Connector& c);

/// Bytes before the first slot of a FIFO block: the counters (ConnFifo), a page.
constexpr size_t kFifoHeaderBytes = 4096;

/// For transports whose FIFO lives elsewhere (SHM's shared segment, P2P's GPU memory; stage
/// 5): allocates only this side's ConnInfo (host memory: kernels use devConn), freed by
/// freeConnectorFifo like a whole FIFO. attachFifo then points it at a block laid out as
/// allocConnectorFifo's: counters at `base`, kNSteps slots from base + kFifoHeaderBytes (and,
/// for kernels, the LL slots after those).
tcclResult_t allocConnInfo(Connector& c);
void attachFifo(Connector& c, char* base, bool withLL128 = false);

/// Stage 5: the bytes of such a block -- header, Simple slots and, for a connector that serves
/// kernels, the LL protocol's slots after them (fifo.h; attachFifo points llBuff there).
size_t fifoBlockBytes(uint64_t stepBytes, bool withLL, bool withLL128 = false);

/// The connectors one communicator must connect at this group end.
struct PendingConnects {
  CommContext* comm;
  std::vector<Connector*> conns;
};

/// Connects every pending connector of every communicator in the group: setup, exchange of
/// ConnectInfo over the bootstrap, connect. Called at tcclGroupEnd for the connectors the plan
/// needs that are not connected yet (connections are created lazily, as in NCCL). Runs in
/// phases across all communicators, so several ranks driven by one thread (tcclCommInitAll)
/// never wait on each other. On failure every pending communicator is put in error and the
/// connectors left unconnected are reset; the caller hands the connected ones that
/// needsProxy() to its proxy.
tcclResult_t connectAll(std::vector<PendingConnects>& pending);

}  // namespace tccl

#endif  // TCCL_TRANSPORT_H_
