/*
 * proxy.h: the proxy thread.
 *
 * What it is: one thread per communicator that progresses the connectors whose transport
 * needs a host-side agent (the socket transport in stage 1, IB in stage 6). It loops over
 * them calling TransportComm::progress(), which moves whatever can move without blocking:
 * on a send connector, published FIFO slots go out to the network and head advances; on a
 * receive connector, bytes come in to free slots and tail advances.
 *
 * When nothing moved it sleeps in poll() on the connectors' sockets and an eventfd that
 * executors kick after posting a counter -- unless a GPU operation is in flight: a kernel
 * cannot kick, so then the proxy keeps polling memory (as NCCL's proxy does while it has ops).
 *
 * Host executors also run progress passes themselves (tryProgress), so host-buffer traffic
 * rarely needs a thread hand-off; progressMutex_ makes sure one thread at a time runs a pass,
 * since the connectors' progress state is not shared-safe. Whoever holds it is "the progress
 * engine". While a host batch runs, the executors are the engine: the proxy thread parks
 * (on a communicator without a GPU; with one, it stays on duty for the kernels), and
 * a waiting executor with nothing to do sleeps in the same poll() the proxy would have used
 * (waitForProgress), so that when the bytes arrive the thread that needs them moves them. On a
 * machine with fewer cores than threads that is what keeps host-buffer calls close to MPI's
 * one-thread-per-rank cost: the proxy thread would otherwise wake first and hand the news on.
 *
 * Invariants: progress() calls never block; only the engine (the holder of progressMutex_)
 * polls the sockets and the kick eventfd, so a kick always reaches the one sleeper; the engine
 * notifies the communicator's ProgressSignal after any progress (host executors may be asleep
 * on it); an error from a connector is recorded on the communicator (setError raises the abort
 * flag) and the proxy keeps running until stop() so that destroy never races with it.
 * hostBatches_ counts the batches whose items are still running, not those the caller has
 * yet to collect: the proxy thread parks only while some item of this communicator runs, and
 * a running item either waits (and then runs passes itself, waitAtLeast) or returns, and the
 * last one to return calls hostBatchEnd, which wakes the thread if sends are left (the
 * interleaving this closes is at startHostBatch). So no published step is ever left without
 * an engine.
 *
 * NCCL counterpart: src/proxy.cc (ncclProxyProgress, progressOps), src/include/proxy.h.
 * Added in: stage 1; the host fast path (the executors as progress engine) in stage 3.
 */
#ifndef TCCL_PROXY_H_
#define TCCL_PROXY_H_

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "host_backend.h"
#include "transport.h"

namespace tccl {

class Proxy : public Kickable {
 public:
  explicit Proxy(CommContext* comm);
  ~Proxy() override;

  tcclResult_t start();
  /// Stops and joins the thread. Idempotent.
  void stop();
  /// Adds a connected connector to the progress list.
  void add(Connector* c);
  /// Wakes the thread if it sleeps: called by executors after they move a counter.
  void kick() override;
  /// One progress pass on the calling thread unless another thread is in one (host executors
  /// call it while posting and waiting). Returns true when anything moved.
  bool tryProgress() override;
  /// Stage 3: one pass over the send connectors only (host executors call it after posting).
  bool trySendProgress() override;
  /// A host executor with nothing to do: becomes the engine and sleeps in poll() if nobody
  /// is the engine, else sleeps on `signal` (the engine notifies it).
  void waitForProgress(ProgressSignal& signal, uint32_t seen, long timeoutUs) override;
  /// A host batch starts / ends on this communicator: the proxy thread parks in between.
  /// hostBatchEnd is called when the batch's last item has returned (by that item's worker,
  /// or by the caller after its fibers), never later: see the invariants above.
  void hostBatchBegin();
  void hostBatchEnd();

 private:
  void loop();
  bool tryPass(bool sendsOnly);  // tryProgress and trySendProgress
  bool progressOnce(bool sendsOnly = false);  // one pass over the connectors; true: moved
  void sleep(int timeoutMs);   // engine only: poll() until a socket is ready, a kick, or timeout
  void parkWhileHostRuns();    // the proxy thread steps aside while host executors are engine

  CommContext* comm_;
  std::thread thread_;
  int eventFd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> kicked_{false};
  std::mutex progressMutex_;         // one progress pass at a time (thread or executors)
  std::mutex mutex_;                 // guards pending_ (add() runs on the user's thread) and
                                     // orders the park handshake (parkCv_)
  std::vector<Connector*> pending_;  // added, not yet picked up by the loop
  std::atomic<bool> havePending_{false};
  std::atomic<int> hostBatches_{0};  // host batches whose items still run (they are engine)
  std::condition_variable parkCv_;   // with mutex_: the proxy thread parks on it
  std::vector<Connector*> conns_;    // the connectors; touched under progressMutex_ only
};

}  // namespace tccl

#endif  // TCCL_PROXY_H_
