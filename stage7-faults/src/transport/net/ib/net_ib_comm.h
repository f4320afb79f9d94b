/*
 * transport/net/ib/net_ib_comm.h: the verbs Net's connection, as its two halves share it.
 *
 * What it is: the objects behind net.h's opaque send and receive comms and requests, and the
 * ready-to-receive FIFO entry. The connection setup (net_ib_connect.cc) creates a comm's CQ,
 * QP and FIFO and walks the QP to RTS; the data path (net_ib.cc) posts work requests on it,
 * writes and reads the FIFO and polls the CQ. Internal to the IB Net: only those two files
 * include it (what the rest of tccl sees is net_ib.h).
 *
 * Invariants: at most kIbMaxRequests messages in flight per connection, message k in request
 * slot, FIFO entry and posted receive k mod kIbMaxRequests; the CQ and the QP are sized from
 * that number (createQp); a comm owns its socket, QP, CQ and FIFO registration, and its
 * destructor releases them, the socket first.
 *
 * NCCL counterpart: the comm, request and FIFO structs of src/transport/net_ib.cc
 * (ncclIbSendComm, ncclIbRecvComm, ncclIbRequest, ncclIbSendFifo); newer NCCL keeps them in
 * src/transport/net_ib/common.h.
 * Added in: stage 6.
 */
#ifndef TCCL_TRANSPORT_NET_IB_NET_IB_COMM_H_
#define TCCL_TRANSPORT_NET_IB_NET_IB_COMM_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/net/ib/net_ib.h"

namespace tccl {

// Messages in flight per connection: requests, ready-to-receive entries, posted receives.
constexpr int kIbMaxRequests = 32;
constexpr int kIbCqEntries = 4 * kIbMaxRequests;  // a receive's two completions, a send's one

/// One entry of the ready-to-receive FIFO: a posted receive, as the receiver announces it.
/// `seq` is last: an RDMA write lands in address order on the NICs we know (NCCL's FIFO relies
/// on the same), so once the sender sees the sequence number, the rest of the entry is there.
struct alignas(32) IbFifoEntry {
  uint64_t addr;
  uint32_t rkey;
  uint32_t size;
  uint64_t seq;  // message index + 1: 0 is "never written"
};

// This Net's objects (these; IbMr in net_ib.cc, IbListenComm in net_ib_connect.cc) derive from
// net.h's opaque handles under names of their own (see socket/net_socket.cc: two Nets defining
// net.h's names broke the one-definition rule).
struct IbComm;

struct IbRequest : NetRequest {
  IbComm* comm = nullptr;
  bool used = false;
  bool isRecv = false;
  int pending = 0;      // completions still to come
  uint64_t size = 0;    // send: the message's; receive: from the immediate
  bool closed = false;  // receive: the peer closed its handshake socket instead
};

/// One connection, either direction.
struct IbComm {
  IbNet* net = nullptr;
  const IbDevice* dev = nullptr;
  Socket sock;  // the handshake socket, kept open for the connection's life
  std::string peerName;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  IbRequest reqs[kIbMaxRequests];
  uint64_t posted = 0;  // messages (send) or receives (receive) made so far
  // The ready-to-receive FIFO. Sender: the entries the receiver writes. Receiver: the entries
  // it writes from (an RDMA write reads registered memory).
  IbFifoEntry fifo[kIbMaxRequests] = {};
  ibv_mr* fifoMr = nullptr;
  uint64_t remoteFifo = 0;  // receiver: the sender's FIFO, and its key
  uint32_t remoteFifoRkey = 0;
  IbQpInfo reply{};  // sender: the receiver's answer, read a piece at a time
  size_t replyGot = 0;
  bool peerReady = false;  // receiver: the sender's QP is in RTS (its "ready" byte came)
  uint64_t token = 0;
  uint64_t lastPeekNs = 0;
  bool peerGone = false;  // receiver: the sender closed the connection (see pollCompletions)

  ~IbComm() {
    // The socket first: a peer whose write into our QP fails from now on finds the close
    // already there, and takes the failure for the end of the connection (pollCompletions).
    sock.close();
    const IbvApi& api = net->api();
    if (qp) api.destroyQp(qp);
    if (cq) api.destroyCq(cq);
    if (fifoMr) api.deregMr(fifoMr);
  }
};

struct IbSendComm : NetSendComm, IbComm {};
struct IbRecvComm : NetRecvComm, IbComm {};

}  // namespace tccl

#endif  // TCCL_TRANSPORT_NET_IB_NET_IB_COMM_H_
