/*
 * common/src/bootstrap_internal.h: what the bootstrap's source files share (private).
 *
 * What it is: the wire protocol between ranks and the root (message types, the check-in
 * payload), the TCCL_BOOTSTRAP_TIMEOUT knob, the root's entry points, and two hooks used by the
 * tests and the fuzzers (frame parsing, a rank's listen address).
 *
 * The protocol, in order:
 *  1. check-in   rank -> root : header{kCheckin, rank, tag = nranks} + CheckinInfo
 *  2. reply      root -> rank : header{kRootPeer} + the successor's listen address, or
 *                               header{kRootError} + text ("ranks 3,4 of 5 never joined")
 *  3. ring all-gather of listen addresses (kAllGather messages, below)
 *  4. messages   rank -> rank : on a connection opened once per (sender, receiver):
 *                               header{kHello, rank} first, then any number of
 *                               header{kUser|kAllGather|kBarrier, rank, tag, size} + payload
 * Every header carries the secret and is validated before its payload is read.
 *
 * NCCL counterpart: src/bootstrap.cc (struct extInfo, bootstrapRoot, unexpected queue).
 * Added in: foundation (common/).
 */
#ifndef TCCL_COMMON_SRC_BOOTSTRAP_INTERNAL_H_
#define TCCL_COMMON_SRC_BOOTSTRAP_INTERNAL_H_

#include <cstdint>
#include <string>

#include "tccl/common/bootstrap.h"
#include "tccl/common/param.h"
#include "tccl/common/socket.h"

/// Seconds any bootstrap step may block; <= 0 waits forever.
TCCL_PARAM(BootstrapTimeout, "BOOTSTRAP_TIMEOUT", 120)

namespace tccl {

constexpr uint32_t kBootstrapMagic = 0x4f425454;  // "TTBO" in memory on little endian

/// BootstrapHeader::type values.
enum BootstrapMsgType : uint32_t {
  kMsgHello = 1,      // first header on a rank-to-rank connection; size 0
  kMsgCheckin = 2,    // rank -> root; tag = nranks; payload CheckinInfo
  kMsgRootPeer = 3,   // root -> rank; payload SocketAddress of the successor
  kMsgRootError = 4,  // root -> rank; payload text, at most kMaxRootErrorText bytes
  kMsgUser = 5,       // Bootstrap::send / recv
  kMsgAllGather = 6,  // Bootstrap::allGather steps
  kMsgBarrier = 7,    // Bootstrap::barrier rounds; tag = the barrier's tag
};

constexpr size_t kMaxRootErrorText = 1024;
/// A rank waits for the root's answer this much longer than the timeout, so that the root,
/// which starts its clock at the first check-in, gets to tell it which ranks are missing.
constexpr double kRootGraceSeconds = 3.0;
/// An accepted connection must present its first header within this time, or it is dropped
/// (an idle intruder cannot hold the root or a rank's receiver forever).
constexpr double kHelloSeconds = 5.0;

/// Payload of a check-in.
struct CheckinInfo {
  int32_t nranks;
  uint32_t reserved;
  SocketAddress listen;  // where this rank accepts bootstrap connections
};

/// A header with the fields filled in (magic included).
BootstrapHeader makeBootstrapHeader(uint32_t type, uint64_t secret, int rank, uint32_t tag,
                                    uint64_t size);

/// True for the types that carry Bootstrap::send/allGather/barrier payloads.
bool isBootstrapMessageType(uint32_t type);

/// Checks an address that came off the wire: a known family and a length that fits it.
tcclResult_t checkWireAddress(const SocketAddress& addr);

/// Parses `len` bytes as one rank-to-rank message frame (header + payload) with the same
/// validation the receiver applies: checkBootstrapHeader, a message type, and a payload of
/// exactly header.size bytes. On success *payload points into buf. Used by the fuzzer.
tcclResult_t parseBootstrapFrame(const void* buf, size_t len, uint64_t secret, int nranks,
                                 BootstrapHeader* header, const void** payload);

/// Starts the root thread on `listener` (already listening); it serves one communicator.
tcclResult_t bootstrapRootStart(Socket&& listener, uint64_t secret);
/// Listens on `addr`'s port (all interfaces of its family) and starts the root there: rank 0
/// does this for ids built from TCCL_COMM_ID or torchrun's MASTER_ADDR/MASTER_PORT.
tcclResult_t bootstrapRootCreate(const SocketAddress& addr, uint64_t secret);

/// The secret for ids that every rank builds on its own from the same address text.
uint64_t deriveSecret(const std::string& addressText);

/// Test hook: the address on which `b` accepts bootstrap connections.
SocketAddress bootstrapListenAddress(const Bootstrap& b);

}  // namespace tccl

#endif  // TCCL_COMMON_SRC_BOOTSTRAP_INTERNAL_H_
