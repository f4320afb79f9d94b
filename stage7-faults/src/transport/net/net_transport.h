/*
 * transport/net/net_transport.h: the network transport -- FIFO steps carried by a Net.
 *
 * What it is: the half of NCCL's network transport that knows nothing of the fabric. Both
 * sides keep a FIFO in their own host memory; the proxy (proxy.h) hands each published step to
 * the Net as one message and publishes what the Net delivers:
 *
 *   sender executor --slot--> send FIFO --proxy: isend--> Net --proxy: irecv/test--> recv FIFO
 *        (posts tail)          (test done: proxy posts head)     (proxy posts tail)  (executor
 *                                                                                 posts head)
 *
 * Up to kNSteps messages are in flight per connection in each direction: the sender hands the
 * Net every published step at once, the receiver posts a receive for every free slot whose
 * destination is decided, so a Net that can overlap messages (verbs) does.
 *
 * Direct mode (fifo.h) for host buffers, where the Net can reach any host memory (sockets):
 * the proxy sends straight from the buffer the executor lent, and posts a receive straight into
 * the buffer the consumer offered. Where the Net needs registered memory (verbs), every step
 * goes through the registered FIFO slots.
 *
 * Connection: the receiver listens and sends the Net's handle in its ConnectInfo (over the
 * bootstrap); the sender connects; connect and accept may take several calls (net.h), which
 * transport.cc's phases give them (finishConnect).
 *
 * Invariants: steps are handed to the Net and completed in step order, so the Net's in-order
 * matching pairs step k with step k; a receive completes into the FIFO only with a size the
 * sender really sent (checked against the slot: larger is a protocol error); the consumer's
 * size check, not the proxy, reports a size mismatch.
 *
 * NCCL counterpart: src/transport/net.cc (sendProxyProgress, recvProxyProgress, netSendSetup,
 * netRecvSetup, ...).
 * Added in: stage 6 (before it, stage 1's transport/socket did this and the socket I/O in one).
 */
#ifndef TCCL_TRANSPORT_NET_NET_TRANSPORT_H_
#define TCCL_TRANSPORT_NET_NET_TRANSPORT_H_

#include <cstdint>
#include <string>

#include "transport.h"
#include "transport/net/net.h"

namespace tccl {

/// What each side tells the other. The receiver's carries its Net's handle; both carry the
/// FIFO geometry, so each side can check the other's.
struct NetConnectInfo {
  NetHandle handle;    // receive side: from listen(); send side: unused
  uint64_t stepBytes;  // must match on both sides
  int32_t rank;        // who sent this info
  int32_t pad;
};
static_assert(sizeof(NetConnectInfo) <= sizeof(ConnectInfo::payload), "net info too large");

/// Validates a NetConnectInfo received from a peer (exposed for tests and the fuzzer).
tcclResult_t checkNetConnectInfo(const NetConnectInfo& info, uint64_t expectedStepBytes);

class NetTransportSend : public TransportComm {
 public:
  explicit NetTransportSend(Net& net) : net_(net) {}
  tcclResult_t setup(CommContext& comm, Connector& c, ConnectInfo* info) override;
  tcclResult_t connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) override;
  tcclResult_t finishConnect(CommContext& comm, Connector& c) override;
  void free(Connector& c) override;
  bool needsProxy() const override { return true; }
  tcclResult_t progress(CommContext& comm, Connector& c, bool* didWork) override;
  int pollFd(const Connector& c, short* events) const override;
  int pollWithinUs(const Connector& c) const override;

 private:
  Net& net_;
};

class NetTransportRecv : public TransportComm {
 public:
  explicit NetTransportRecv(Net& net) : net_(net) {}
  tcclResult_t setup(CommContext& comm, Connector& c, ConnectInfo* info) override;
  tcclResult_t connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) override;
  void free(Connector& c) override;
  bool needsProxy() const override { return true; }
  tcclResult_t progress(CommContext& comm, Connector& c, bool* didWork) override;
  int pollFd(const Connector& c, short* events) const override;
  int pollWithinUs(const Connector& c) const override;

 private:
  Net& net_;
};

/// The network transport over one Net: "NET/Socket", "NET/IB".
class NetTransport : public Transport {
 public:
  /// `bit`: the Net's kNetBit* (transport.h), which both ends' PeerInfo must carry.
  NetTransport(Net& net, uint32_t bit)
      : net_(net), bit_(bit), name_(std::string("NET/") + net.name()), send_(net), recv_(net) {}
  const char* name() const override { return name_.c_str(); }
  /// Any peer that has this Net too (the list puts the network last).
  bool canConnect(const CommContext& comm, const PeerInfo& peer, bool) const override;
  TransportComm& send() override { return send_; }
  TransportComm& recv() override { return recv_; }

 private:
  Net& net_;
  uint32_t bit_;
  std::string name_;
  NetTransportSend send_;
  NetTransportRecv recv_;
};

}  // namespace tccl

#endif  // TCCL_TRANSPORT_NET_NET_TRANSPORT_H_
