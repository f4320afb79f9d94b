/*
 * transport/socket/socket_transport.h: the socket transport (NCCL's NET/Socket).
 *
 * What it is: FIFO slots carried over TCP by the proxy thread. Both sides keep a FIFO in
 * their own host memory; the executor never touches a socket:
 *
 *   sender executor --slot--> send FIFO --proxy: send()--> TCP --proxy: recv()--> recv FIFO
 *        (posts tail)              (proxy posts head)        (proxy posts tail)  (executor
 *                                                                                 posts head)
 *
 * Each step goes out as an 8-byte size header on socket 0 followed by the slot's bytes. A
 * connection may use several TCP sockets (TCCL_NSOCKS_PERCONN): a large step is cut into
 * equal parts, part i on socket i, which helps when one TCP stream cannot fill the link.
 *
 * Invariants: the receiver checks every header (0 <= size <= stepBytes) before it moves any
 * data to a slot; every socket of a connection presents the communicator's secret, rank and
 * channel in a hello before it is used; a closed or reset socket is a tcclRemoteError, never a hang.
 *
 * NCCL counterpart: src/transport/net.cc (sendProxyProgress, recvProxyProgress) with
 * src/transport/net_socket.cc (ncclNetSocket: isend/irecv over NSOCKS_PERTHREAD sockets).
 * Added in: stage 1.
 */
#ifndef TCCL_TRANSPORT_SOCKET_SOCKET_TRANSPORT_H_
#define TCCL_TRANSPORT_SOCKET_SOCKET_TRANSPORT_H_

#include <cstdint>

#include "tccl/common/socket.h"
#include "transport.h"

namespace tccl {

constexpr int kMaxSocketsPerConn = 8;

/// What the receive side tells the sender: where to connect and how. Also sent by the send
/// side (with no address) so each can check the other's FIFO geometry.
struct SocketConnectInfo {
  SocketAddress addr;   // the receiver's listening socket
  uint64_t stepBytes;   // must match on both sides
  int32_t nsocks;       // sockets per connection
  int32_t rank;         // who sent this info
};

/// A hello: the first bytes on every data socket.
struct SocketHello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t channel;
  int32_t sockIndex;
  int32_t pad;
};

class SocketSendComm : public TransportComm {
 public:
  tcclResult_t setup(CommContext& comm, Connector& c, ConnectInfo* info) override;
  tcclResult_t connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) override;
  void free(Connector& c) override;
  bool needsProxy() const override { return true; }
  tcclResult_t progress(CommContext& comm, Connector& c, bool* didWork) override;
  int pollFd(const Connector& c, short* events) const override;
};

class SocketRecvComm : public TransportComm {
 public:
  tcclResult_t setup(CommContext& comm, Connector& c, ConnectInfo* info) override;
  tcclResult_t connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) override;
  void free(Connector& c) override;
  bool needsProxy() const override { return true; }
  tcclResult_t progress(CommContext& comm, Connector& c, bool* didWork) override;
  int pollFd(const Connector& c, short* events) const override;
};

class SocketTransport : public Transport {
 public:
  const char* name() const override { return "NET/Socket"; }
  bool canConnect(const CommContext&, const PeerInfo&) const override { return true; }
  TransportComm& send() override { return send_; }
  TransportComm& recv() override { return recv_; }

 private:
  SocketSendComm send_;
  SocketRecvComm recv_;
};

/// Validates a SocketConnectInfo received from a peer (exposed for tests and the fuzzer).
tcclResult_t checkSocketConnectInfo(const SocketConnectInfo& info, uint64_t expectedStepBytes);

}  // namespace tccl

#endif  // TCCL_TRANSPORT_SOCKET_SOCKET_TRANSPORT_H_
