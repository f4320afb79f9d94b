/*
 * transport/net/net.h: the network interface -- what a network must offer for tccl to carry
 * FIFO steps over it.
 *
 * What it is: chapter 6 splits the network transport in two, as NCCL does. The transport
 * (net_transport.cc) knows FIFOs, steps, direct mode and the proxy; a Net knows how to move one
 * message from a buffer here into a buffer there. Sockets (socket/net_socket.cc) and verbs
 * (ib/net_ib.h) are two Nets behind this one interface, so the FIFO logic is written once and
 * a new fabric is one new Net. Stage 5's socket transport (src/transport/socket/) does both
 * jobs in one file, which leaves nothing for a verbs transport to reuse.
 *
 * The shape is NCCL's net plugin API (ncclNet_v8_t, src/include/nccl_net.h), call for call:
 *
 *   receive side                            send side
 *   listen(dev) -> handle --(bootstrap)-->  connect(dev, handle) -> sendComm (maybe later)
 *   accept(listenComm) -> recvComm (maybe later)
 *   regMr(recvComm, buffer) -> mhandle      regMr(sendComm, buffer) -> mhandle
 *   irecv(recvComm, buffer, size) -> req    isend(sendComm, buffer, size) -> req (maybe later)
 *   test(req) -> done, size                 test(req) -> done
 *   closeRecv / closeListen                 closeSend
 *
 * "Maybe later": connect, accept and isend never block. connect and accept may return a null
 * comm, isend a null request: the caller calls again (the connection handshake is still under
 * way; the receiver has not posted a buffer for this message yet). Messages between one
 * sendComm and its recvComm are matched in order: the k-th isend lands in the k-th irecv.
 *
 * Two rules of ours where NCCL's API says less:
 *  - A message larger than the receive posted for it is not delivered: test() reports done
 *    and the message's true size, and the receive buffer is left as it was (NCCL reports an
 *    error). The transport passes the size on, and the consumer's size check names the
 *    mismatch, as for every other transport (fifo.h).
 *  - A peer that closed its side cleanly between messages completes a pending receive with
 *    size kNetClosed (the transport then marks its FIFO closed); a connection that breaks in
 *    the middle of a message is an error.
 *
 * Invariants: a Net is shared by every communicator of the process (its state is per comm
 * object); every call on one comm object comes from one thread at a time (the progress engine,
 * proxy.h); requests of one comm complete in the order they were made.
 *
 * NCCL counterpart: src/include/nccl_net.h (ncclNet_v8_t), src/include/net.h.
 * Added in: stage 6.
 */
#ifndef TCCL_TRANSPORT_NET_NET_H_
#define TCCL_TRANSPORT_NET_NET_H_

#include <poll.h>

#include <cstddef>
#include <cstdint>

#include "core.h"
#include "tccl/common/socket.h"

namespace tccl {

/// What a receiver's listen() produces and the sender's connect() needs: an address, a QP
/// description... opaque to everyone but the Net that made it. NCCL_NET_HANDLE_MAXSIZE is 128;
/// ours holds a whole sockaddr_storage (128 bytes by itself) and travels in a ConnectInfo.
struct NetHandle {
  alignas(8) uint8_t bytes[192];
};

/// What a Net says about one of its devices (NCCL: ncclNetProperties_t, trimmed).
struct NetProperties {
  char name[64];     // "eth0", "rxe0:1"
  int speedMbps;     // the port's speed, for logs
  bool anyHostMemory;  // moves bytes from and to any host memory, unregistered (sockets);
                      // false: only inside regions from regMr (verbs)
  bool dmabuf;       // can register GPU memory by dma-buf (GPUDirect RDMA; stage 6's IB opt-in)
};

/// A Net's per-connection objects: opaque handles here; each Net derives its own types from
/// them, under names of its own, and casts back (NCCL's plugins use void* for the same).
struct NetListenComm {};
struct NetSendComm {};
struct NetRecvComm {};
struct NetRequest {};
struct NetMr {};

/// The size test() reports for a receive whose peer closed the connection cleanly instead.
constexpr size_t kNetClosed = SIZE_MAX;

/// Memory types for regMr (NCCL's NCCL_PTR_HOST / NCCL_PTR_CUDA).
enum class NetMemType { kHost, kCuda };

class Net {
 public:
  virtual ~Net() = default;
  /// "Socket", "IB": the transport names itself NET/<name>, as NCCL's INIT lines do.
  virtual const char* name() const = 0;
  /// Devices this Net can use (NICs, IB ports); 0 makes it unusable.
  virtual int devices() const = 0;
  virtual tcclResult_t getProperties(int dev, NetProperties* props) const = 0;

  /// Receive side: starts listening on `dev`; *handle goes to the sender (over the bootstrap).
  virtual tcclResult_t listen(int dev, NetHandle* handle, NetListenComm** listenComm) = 0;
  /// Send side: connects to the receiver that made `handle`. *sendComm stays null while the
  /// handshake is under way: call again with the same handle, in which the Net may keep the
  /// handshake's progress (NCCL's IB handle does: its `stage`).
  virtual tcclResult_t connect(int dev, NetHandle* handle, NetSendComm** sendComm) = 0;
  /// Receive side: the connection from the sender. *recvComm stays null until it is there.
  virtual tcclResult_t accept(NetListenComm* listenComm, NetRecvComm** recvComm) = 0;
  /// tccl's addition: gives up a connect() that has not finished (the communicator failed
  /// before it did), freeing what the Net keeps in `handle`. NCCL's API has no such call.
  virtual void abandonConnect(NetHandle* handle) {}

  /// Registers `size` bytes at `data` for use by this comm's isend/irecv (verbs: a memory
  /// region; sockets: nothing to do). Either comm may be given; the other is null.
  virtual tcclResult_t regMr(NetSendComm* sendComm, NetRecvComm* recvComm, void* data,
                             size_t size, NetMemType type, NetMr** mhandle) = 0;
  /// GPU memory by dma-buf (GPUDirect RDMA): `size` bytes at `data`, which are the bytes at
  /// `offset` in the dma-buf `fd` (gdr.h exports one). Only for a Net whose properties say
  /// `dmabuf`; the others refuse, in words. The caller may close `fd` once this returns.
  /// (NCCL: regMrDmaBuf.)
  virtual tcclResult_t regMrDmaBuf(NetSendComm* sendComm, NetRecvComm* recvComm, void* data,
                                   size_t size, uint64_t offset, int fd, NetMr** mhandle) {
    *mhandle = nullptr;
    TCCL_WARN("NET/%s: cannot register GPU memory (no dma-buf support)", name());
    return tcclInvalidUsage;
  }
  virtual tcclResult_t deregMr(NetSendComm* sendComm, NetRecvComm* recvComm, NetMr* mhandle) = 0;

  /// Starts sending `size` bytes from `data` (inside `mhandle`'s region, or anywhere when the
  /// Net needs no registration). *request stays null when the message cannot start yet.
  virtual tcclResult_t isend(NetSendComm* comm, void* data, size_t size, NetMr* mhandle,
                             NetRequest** request) = 0;
  /// Posts a receive of at most `size` bytes into `data`.
  virtual tcclResult_t irecv(NetRecvComm* comm, void* data, size_t size, NetMr* mhandle,
                             NetRequest** request) = 0;
  /// Makes received data visible to the GPU (verbs into GPU memory need it; NCCL's iflush).
  /// *request stays null when there is nothing to flush.
  virtual tcclResult_t iflush(NetRecvComm* comm, void* data, size_t size, NetMr* mhandle,
                              NetRequest** request) = 0;
  /// Moves the request on; *done once it completed (the request is then freed), with the
  /// message's size (a receive: what the sender sent; see the rules above).
  virtual tcclResult_t test(NetRequest* request, bool* done, size_t* size) = 0;

  virtual tcclResult_t closeSend(NetSendComm* comm) = 0;
  virtual tcclResult_t closeRecv(NetRecvComm* comm) = 0;
  virtual tcclResult_t closeListen(NetListenComm* comm) = 0;

  /// tccl's addition: the file descriptor (and events) the proxy may sleep on in poll() while
  /// this comm has work in flight; -1 when the Net must be polled instead (NCCL's proxy always
  /// polls). Either comm may be given.
  virtual int pollFd(const NetSendComm* sendComm, const NetRecvComm* recvComm,
                     short* events) const {
    return -1;
  }
};

/// The Nets of this build: sockets always; verbs when libibverbs and a device are found at run
/// time (transport.cc lists them).
Net& socketNet();
Net& ibNet();

/// The address a Net listens on for connections (sockets: the data; verbs: the handshake):
/// the interface the bootstrap uses (TCCL_SOCKET_IFNAME...), looked up once.
tcclResult_t netListenAddress(SocketAddress* out);

}  // namespace tccl

#endif  // TCCL_TRANSPORT_NET_NET_H_
