/*
 * common/bootstrap.h: the out-of-band network that ranks use before and beside the data path.
 *
 * What it is: NCCL's bootstrap. A unique id carries rank 0's root address and a random secret.
 * Every rank opens its own listening socket, checks in with the root, learns its ring neighbour
 * and the listen address of every rank (an all-gather around the bootstrap ring), and from
 * then on exchanges small tagged messages directly with any peer: connection info for the
 * transports, barriers, all-gathers of per-rank info.
 *
 * Invariants:
 *  - Every connection starts with a hello carrying the id's secret; a wrong secret is refused.
 *  - Every message has a fixed header with a length that is checked against a bound
 *    (kMaxBootstrapMessage) and against what the receiver expects, before any payload is read.
 *  - No call blocks past TCCL_BOOTSTRAP_TIMEOUT seconds: a rank that never arrives gives an
 *    error naming the missing ranks. With an interrupt counter (setInterrupt), a wait also
 *    ends within 100 ms of the counter moving.
 *  - send(peer, tag) / recv(peer, tag) match by (peer, tag) in FIFO order; messages that arrive
 *    for another tag wait in an unexpected queue.
 *
 * NCCL counterpart: src/bootstrap.cc, src/include/bootstrap.h.
 * Added in: foundation (common/).
 */
#ifndef TCCL_COMMON_BOOTSTRAP_H_
#define TCCL_COMMON_BOOTSTRAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tccl/common/socket.h"
#include "tccl/result.h"

namespace tccl {

/// Size of the opaque unique id, as NCCL_UNIQUE_ID_BYTES.
constexpr size_t kUniqueIdBytes = 128;
/// Upper bound on one bootstrap message's payload.
constexpr size_t kMaxBootstrapMessage = 64u << 20;

/// What an opaque unique id holds. Encoded into / decoded from kUniqueIdBytes with a magic and
/// a version so a garbage id is rejected rather than trusted.
struct UniqueIdData {
  SocketAddress root;  // where rank 0's root listener accepts check-ins
  uint64_t secret = 0; // presented on every bootstrap connection
  bool startRoot = false;  // true when built from TCCL_COMM_ID / env: rank 0 must start the root
};
tcclResult_t encodeUniqueId(const UniqueIdData& data, void* id /*kUniqueIdBytes*/);
tcclResult_t decodeUniqueId(const void* id /*kUniqueIdBytes*/, UniqueIdData* out);

/// tcclGetUniqueId's work: with TCCL_COMM_ID=host:port set, the id names that address (and
/// rank 0's init starts the root there); otherwise a root listener is started in this process
/// on the chosen interface, waiting for the ranks of one communicator.
tcclResult_t bootstrapGetUniqueId(void* id /*kUniqueIdBytes*/);
/// A root listener in this process, always (TCCL_COMM_ID names the first communicator's root
/// only): the id of a communicator made from another one (split, shrink; stage 7).
tcclResult_t bootstrapNewRoot(void* id /*kUniqueIdBytes*/);

/// For torchrun-style launches: builds the id from MASTER_ADDR/MASTER_PORT (rank 0 starts the
/// root there) and reads RANK and WORLD_SIZE. The secret is derived from the address and
/// TCCL_BOOTSTRAP_SECRET, which all ranks must share when set.
tcclResult_t bootstrapIdFromEnv(void* id, int* rank, int* nranks);

/// TCCL_BOOTSTRAP_TIMEOUT in seconds (<= 0: no timeout). Transports use the same bound for
/// their own connection setup, so no step of communicator setup can hang.
double bootstrapTimeoutSeconds();

/// A rank's bootstrap endpoint.
class Bootstrap {
 public:
  /// Joins the communicator of `nranks` named by `id` as `rank`. Blocks until every rank has
  /// checked in (or TCCL_BOOTSTRAP_TIMEOUT passes: the error names the missing ranks).
  static tcclResult_t create(const void* id, int rank, int nranks, std::unique_ptr<Bootstrap>* out);
  ~Bootstrap();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  /// All-gather: `data` holds nranks slots of `bytesPerRank`; slot rank() is this rank's
  /// input; on return every slot is filled. Runs around the bootstrap ring.
  tcclResult_t allGather(void* data, size_t bytesPerRank);
  /// Tagged point-to-point message to/from any peer. recv fails if the sender's size differs.
  tcclResult_t send(int peer, uint32_t tag, const void* data, size_t size);
  tcclResult_t recv(int peer, uint32_t tag, void* data, size_t size);
  /// Returns when every rank has entered the barrier (tag distinguishes concurrent barriers).
  tcclResult_t barrier(uint32_t tag = 0);

  /// Makes every wait for a message also end (tcclRemoteError) when *counter changes from the
  /// value it had when the wait began: a communicator counts its aborts there, so an aborted
  /// call never waits out the timeout here, while a wait begun after the abort (a shrink of
  /// the failed communicator) still works. Used from stage 7; the counter must outlive this.
  void setInterrupt(const std::atomic<uint32_t>* counter);

  /// The secret of this communicator; transports present it on their own connections.
  uint64_t secret() const { return secret_; }
  /// The address of this rank's network interface (transports listen on the same one).
  const SocketAddress& localAddress() const { return localAddr_; }

  struct Impl;

 private:
  Bootstrap() = default;
  int rank_ = -1;
  int nranks_ = 0;
  uint64_t secret_ = 0;
  SocketAddress localAddr_;
  std::unique_ptr<Impl> impl_;
};

/// The wire header of every bootstrap message (exposed for the fuzzer and the tests).
struct BootstrapHeader {
  uint32_t magic;
  uint32_t type;   // hello, checkin, peer message, ...
  uint64_t secret;
  int32_t rank;    // sender's rank
  uint32_t tag;
  uint64_t size;   // payload bytes that follow
};
static_assert(sizeof(BootstrapHeader) == 32, "BootstrapHeader is a wire format");
/// Validates a received header: magic, secret, rank < nranks, size <= maxSize.
/// Returns tcclSystemError / tcclRemoteError with a WARN naming what was wrong.
tcclResult_t checkBootstrapHeader(const BootstrapHeader& h, uint64_t secret, int nranks,
                                  size_t maxSize);

}  // namespace tccl

#endif  // TCCL_COMMON_BOOTSTRAP_H_
