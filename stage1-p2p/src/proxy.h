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
 * Invariants: progress() calls never block, and only this thread calls them (the connectors'
 * progress state is not shared-safe); only this thread sleeps in poll(), so a kick always
 * reaches the one sleeper; it notifies the communicator's ProgressSignal after any progress
 * (host executors may be asleep on it); an error from a connector is recorded on the
 * communicator (setError raises the abort flag) and the proxy keeps running until stop() so
 * that destroy never races with it.
 *
 * NCCL counterpart: src/proxy.cc (ncclProxyProgress, progressOps), src/include/proxy.h.
 * Added in: stage 1.
 */
#ifndef TCCL_PROXY_H_
#define TCCL_PROXY_H_

#include <atomic>
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

 private:
  void loop();
  bool progressOnce();        // one pass over the connectors; true when anything moved
  void sleep(int timeoutMs);  // poll() until a socket is ready, a kick, or the timeout

  CommContext* comm_;
  std::thread thread_;
  int eventFd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> kicked_{false};
  std::mutex mutex_;                 // guards pending_ (add() runs on the user's thread)
  std::vector<Connector*> pending_;  // added, not yet picked up by the loop
  std::atomic<bool> havePending_{false};
  std::vector<Connector*> conns_;    // the connectors; touched by the proxy thread only
};

}  // namespace tccl

#endif  // TCCL_PROXY_H_
