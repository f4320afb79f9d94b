/*
 * transport/shm/shm_transport.h: the shared-memory transport (ranks of one host).
 *
 * What it is: a connection whose FIFO -- counters and slots -- sits in one shared segment
 * (shm_segment.h) mapped into both processes. The executors of the two ranks run the FIFO
 * protocol of device/fifo.h on it directly: the producer writes slots and publishes tail, the
 * consumer reads slots and publishes head. No proxy thread and no socket take part; a step
 * costs one copy into the segment and one out of it. For a communicator with a GPU whose
 * connector serves kernels, the segment is also registered with CUDA (cuda_ipc.h), so the two
 * ranks' kernels exchange slots through host memory.
 *
 * Setup, in the four phases of transport.cc:
 *   recv setup    listen on a fresh abstract Unix socket; its name goes in ShmRecvInfo
 *   send setup    create the segment (memfd); ShmSendInfo carries its geometry
 *   send connect  send the segment's descriptor (with a hello) to the receiver's socket
 *   recv connect  accept it, check the hello, map the segment; close every descriptor
 * After that the segment exists only as two mappings: when both processes are gone (crashed
 * or not), so is the memory. /dev/shm is never used.
 *
 * Invariants: both sides agree on stepBytes and the segment size (checked on connect); the
 * segment's ConnFifo is written by the producer (tail, sizes) and the consumer (head) only,
 * each on its own cache line; a connector of this transport never has direct mode (a peer
 * process cannot read our user buffers), so every step goes through a slot.
 *
 * NCCL counterpart: src/transport/shm.cc (shmCanConnect, shmSendSetup/Connect,
 * shmRecvSetup/Connect).
 * Added in: stage 5.
 */
#ifndef TCCL_TRANSPORT_SHM_SHM_TRANSPORT_H_
#define TCCL_TRANSPORT_SHM_SHM_TRANSPORT_H_

#include "transport.h"
#include "transport/shm/shm_segment.h"

namespace tccl {

/// What the receive side tells the sender: where to send the segment's descriptor.
struct ShmRecvInfo {
  FdSocketName socket;
  uint64_t stepBytes;
  int32_t rank;
  int32_t pad;
};

/// What the send side tells the receiver: the geometry it will get.
struct ShmSendInfo {
  uint64_t stepBytes;
  uint64_t segmentBytes;
  int32_t rank;
  int32_t pad;
};

/// The message that carries the descriptor: who sends it, for which connection.
struct ShmHello {
  uint64_t magic;
  uint64_t secret;  // the communicator's bootstrap secret: only our peer knows it
  uint64_t segmentBytes;
  int32_t rank;
  int32_t channel;
};

class ShmSendComm : public TransportComm {
 public:
  tcclResult_t setup(CommContext& comm, Connector& c, ConnectInfo* info) override;
  tcclResult_t connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) override;
  void free(Connector& c) override;
};

class ShmRecvComm : public TransportComm {
 public:
  tcclResult_t setup(CommContext& comm, Connector& c, ConnectInfo* info) override;
  tcclResult_t connect(CommContext& comm, Connector& c, const ConnectInfo& peerInfo) override;
  void free(Connector& c) override;
};

class ShmTransport : public Transport {
 public:
  const char* name() const override { return "SHM"; }
  bool hasLL() const override { return true; }
  /// Same host (and TCCL_SHM_DISABLE unset).
  bool canConnect(const CommContext& comm, const PeerInfo& peer, bool forDevice) const override;
  TransportComm& send() override { return send_; }
  TransportComm& recv() override { return recv_; }

 private:
  ShmSendComm send_;
  ShmRecvComm recv_;
};

/// Bytes of a FIFO segment: the counters' page, then kNSteps slots, then (for a connector that
/// serves kernels) the LL slots.
size_t shmSegmentBytes(uint64_t stepBytes, bool forDevice);

}  // namespace tccl

#endif  // TCCL_TRANSPORT_SHM_SHM_TRANSPORT_H_
