/*
 * transport/net/socket/net_socket.h: the socket Net -- messages over TCP.
 *
 * What it is: the Net (net.h) that every machine has. A connection is one to
 * TCCL_NSOCKS_PERCONN TCP sockets; a message goes out as an 8-byte size header on socket 0
 * followed by its bytes, a large one cut into equal parts, part i on socket i (which helps when
 * one TCP stream cannot fill the link). Requests of one comm are worked on in order: the
 * stream itself orders the messages, so the k-th isend meets the k-th irecv.
 *
 * In stages 1 to 5 this code is the socket transport's progress functions, which also do the
 * FIFO's work; from stage 6 the FIFO half lives in net_transport.cc, once for every Net.
 *
 * Invariants: the receiver checks every header before it moves a byte to memory (a message
 * larger than the posted receive is read and dropped, and its size reported: net.h's rule;
 * a header beyond kMaxSocketMessage is a protocol error); every socket presents the
 * listener's random token in a hello before it is used, so only the holder of the handle (sent
 * over the bootstrap) can connect; a reset socket is tcclRemoteError, never a hang.
 *
 * NCCL counterpart: src/transport/net_socket.cc (ncclNetSocket, NCCL_NSOCKS_PERTHREAD).
 * Added in: stage 6 (the code: stage 1's socket transport).
 */
#ifndef TCCL_TRANSPORT_NET_SOCKET_NET_SOCKET_H_
#define TCCL_TRANSPORT_NET_SOCKET_NET_SOCKET_H_

#include <cstdint>

#include "tccl/common/socket.h"
#include "transport/net/net.h"

namespace tccl {

constexpr int kMaxSocketsPerConn = 8;
/// The largest message a socket receive accepts a header for (a FIFO step is far smaller).
constexpr int64_t kMaxSocketMessage = int64_t(1) << 32;

/// The first word of every socket Net handle.
constexpr uint64_t kSocketNetHandleMagic = 0x7cc15ec7700d0002ull;

/// The socket Net's handle: where the receiver listens, and the token its sockets must show.
struct SocketNetHandle {
  uint64_t magic;
  uint64_t token;       // random per listen: the hello must carry it
  int32_t nsocks;       // sockets per connection (the receiver's TCCL_NSOCKS_PERCONN)
  int32_t pad;
  SocketAddress addr;   // the receiver's listening socket
};
static_assert(sizeof(SocketNetHandle) <= sizeof(NetHandle), "socket handle too large");

/// Validates a handle that came from a peer (exposed for tests and the fuzzer).
tcclResult_t checkSocketNetHandle(const SocketNetHandle& h);

class SocketNet : public Net {
 public:
  const char* name() const override { return "Socket"; }
  int devices() const override { return 1; }
  tcclResult_t getProperties(int dev, NetProperties* props) const override;
  tcclResult_t listen(int dev, NetHandle* handle, NetListenComm** listenComm) override;
  tcclResult_t connect(int dev, NetHandle* handle, NetSendComm** sendComm) override;
  tcclResult_t accept(NetListenComm* listenComm, NetRecvComm** recvComm) override;
  tcclResult_t regMr(NetSendComm*, NetRecvComm*, void*, size_t, NetMemType type,
                     NetMr** mhandle) override;
  tcclResult_t deregMr(NetSendComm*, NetRecvComm*, NetMr*) override { return tcclSuccess; }
  tcclResult_t isend(NetSendComm* comm, void* data, size_t size, NetMr* mhandle,
                     NetRequest** request) override;
  tcclResult_t irecv(NetRecvComm* comm, void* data, size_t size, NetMr* mhandle,
                     NetRequest** request) override;
  tcclResult_t iflush(NetRecvComm*, void*, size_t, NetMr*, NetRequest** request) override {
    *request = nullptr;  // host memory: nothing to flush
    return tcclSuccess;
  }
  tcclResult_t test(NetRequest* request, bool* done, size_t* size) override;
  tcclResult_t closeSend(NetSendComm* comm) override;
  tcclResult_t closeRecv(NetRecvComm* comm) override;
  tcclResult_t closeListen(NetListenComm* comm) override;
  int pollFd(const NetSendComm* sendComm, const NetRecvComm* recvComm,
             short* events) const override;
};

}  // namespace tccl

#endif  // TCCL_TRANSPORT_NET_SOCKET_NET_SOCKET_H_
