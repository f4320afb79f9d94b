/*
 * transport/shm/peer_watch.h: noticing that a peer process on this host has died.
 *
 * What it is: over the network a dead peer shows up by itself -- its sockets close and the
 * proxy marks the FIFOs closed. Over shared memory nothing shows up: the dead peer's counters
 * simply stop moving, and a waiter would wait forever. So every SHM connector registers its
 * peer's process here, and a waiter that has polled for a while (host_backend.h, the slow
 * path before it sleeps) asks check(): one poll() over pidfds, which become readable when
 * their process exits. For a dead peer, check() marks every FIFO shared with it closed --
 * what the proxy does for a socket -- so the waiters return WorkStatus::kPeerClosed and the call
 * fails with tcclRemoteError instead of hanging.
 *
 * The peer's pid comes from the kernel (SO_PEERCRED on the socket that carried the segment),
 * so it is the peer as seen from our pid namespace, not a number the peer reported.
 *
 * Invariants: check() never blocks; a FIFO is marked closed after its peer is gone only, and
 * at most once; watch() and check() run on the thread that drives the communicator (or its
 * executors, which never run during connection setup).
 *
 * NCCL counterpart: none: NCCL's SHM transport does not notice a dead peer (the job hangs
 * until a watchdog, e.g. PyTorch's, aborts the communicator).
 * Added in: stage 5.
 */
#ifndef TCCL_TRANSPORT_SHM_PEER_WATCH_H_
#define TCCL_TRANSPORT_SHM_PEER_WATCH_H_

#include <sys/types.h>

#include <mutex>
#include <vector>

#include "device/fifo.h"
#include "host_backend.h"


namespace tccl {

struct CommContext;

class PeerWatch : public PeerCheck {
 public:
  /// Stage 7: `comm` (may be null) fails as a whole when a peer dies (setError), so every
  /// call waiting on it returns tcclRemoteError, not only one that waits on the dead peer.
  explicit PeerWatch(CommContext* comm = nullptr) : comm_(comm) {}
  ~PeerWatch() override;
  /// Watches process `pid` (rank `rank`); `fifo` is shared with it.
  void watch(int rank, pid_t pid, ConnFifo* fifo);
  /// Marks the FIFOs of dead peers closed. Cheap enough for a waiter's slow path.
  void check() override;
  /// Stage 7: a clean departure (commFree, not an abort): closes our end of every FIFO we
  /// share, so that each peer's check() sees that we left, not that we died.
  void leave();

 private:
  struct Peer {
    int rank;
    pid_t pid;
    int pidfd;  // -1: no pidfd (old kernel): kill(pid, 0) is asked instead
    bool dead;
    std::vector<ConnFifo*> fifos;
  };
  CommContext* comm_;  // stage 7
  std::mutex mutex_;  // pool threads of one communicator may check at the same time
  std::vector<Peer> peers_;
};

}  // namespace tccl

#endif  // TCCL_TRANSPORT_SHM_PEER_WATCH_H_
