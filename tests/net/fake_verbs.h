/*
 * tests/net/fake_verbs.h: an in-process verbs device, behind the IbvApi seam (ibvwrap.h).
 *
 * What it is: enough of a verbs provider to run the IB Net (net_ib.h) with both ends of a
 * connection in one test process, on any machine. It is strict where real hardware is strict,
 * so that a mistake in the IB Net fails here first:
 *  - the QP state machine: RESET -> INIT -> RTR -> RTS only, each step with exactly the
 *    attribute mask verbs requires (a missing or extra attribute is EINVAL), RoCE address
 *    vectors must be global (GRH) with a source GID index that exists;
 *  - posting: receives in INIT or later, sends only in RTS;
 *  - RDMA writes check the local lkey and the remote rkey, range and access (else
 *    IBV_WC_REM_ACCESS_ERR), and a write with immediate must find a posted receive (real
 *    hardware would retry; here a receiver-not-ready is an error, so a protocol that ever
 *    depends on it fails loudly);
 *  - the "fabric": a write reaches its QP only if the destination GID is in the device's GID
 *    table and the route is usable -- with `v2Only`, RoCE v1 GIDs do not route (a routed
 *    RoCE v2 network); an unroutable write completes with IBV_WC_RETRY_EXC_ERR (status 12),
 *    as a real one would after the retries, and the QP goes to the error state;
 *  - dma-buf registration (GPUDirect RDMA) only with `dmabuf`, and then only of a descriptor
 *    that is open (else EBADF, which is also what the IB Net's probe expects); without it,
 *    EOPNOTSUPP, as Soft-RoCE. The region is the iova (the GPU address) and its length; the
 *    fake does not check that the descriptor really backs it.
 * Writes are delivered at post time (synchronously): RC's order is kept trivially. A write
 * from or into a dma-buf region goes through Options::copy when one is given (the fake
 * libibverbs, fake_verbs_lib.cc, passes a CUDA copy: the "NIC" writing GPU memory).
 *
 * Invariants: one FakeVerbs at a time (the seam has no user pointer: the functions find it in
 * a global); every call takes one mutex, so the two ends may run on two threads.
 *
 * NCCL counterpart: none (NCCL's IB code is tested on hardware only).
 * Added in: stage 6.
 */
#ifndef TCCL_TESTS_NET_FAKE_VERBS_H_
#define TCCL_TESTS_NET_FAKE_VERBS_H_

#include <string>
#include <vector>

#include "transport/net/ib/ibvwrap.h"

namespace tccl {
namespace fake {

struct GidEntry {
  ibv_gid gid;
  GidType type;
};

struct Options {
  std::string name = "fake0";
  uint8_t linkLayer = IBV_LINK_LAYER_ETHERNET;
  ibv_port_state portState = IBV_PORT_ACTIVE;
  ibv_mtu activeMtu = IBV_MTU_1024;
  uint16_t lid = 0;
  std::vector<GidEntry> gids;  // the port's GID table
  bool v2Only = true;          // RoCE v1 GIDs do not route
  bool dmabuf = false;         // ibv_reg_dmabuf_mr works (GPUDirect RDMA)
  /// Copies a write that involves a dma-buf region (null: memcpy).
  void (*copy)(void* dst, const void* src, size_t bytes) = nullptr;
};

/// A GID holding IPv4 address a.b.c.d (::ffff:a.b.c.d), or an IPv6 link-local one.
ibv_gid ipv4Gid(int a, int b, int c, int d);
ibv_gid linkLocalGid(int lowByte);

/// The usual RoCE table: link-local v1, link-local v2, IPv4 v1, IPv4 v2 (indexes 0..3).
Options roceOptions();

struct QpRecord {
  uint32_t qpn;
  std::vector<std::string> transitions;  // "RESET->INIT", ...
  int sgidIndex = -1;
  uint8_t timeout = 0, retryCnt = 0;
  int accessFlags = 0;
};

class FakeVerbs {
 public:
  explicit FakeVerbs(Options o);
  ~FakeVerbs();
  const IbvApi& api() const { return api_; }
  const Options& options() const { return opts_; }
  /// Everything each QP went through (for the state machine's tests).
  std::vector<QpRecord> qps() const;
  /// Objects still alive (a test checks that closing frees them all).
  int liveObjects() const;
  /// Counters: QPs ever created, dma-buf regions ever registered.
  int qpsCreated() const;
  int dmabufRegistrations() const;

 private:
  Options opts_;
  IbvApi api_{};
};

}  // namespace fake
}  // namespace tccl

#endif  // TCCL_TESTS_NET_FAKE_VERBS_H_
