/*
 * tests/fuzz/fuzz_socket_connect_info.cc: fuzzes the socket transport's connection info.
 *
 * What it checks: the bytes a peer sends during connection setup (a 256-byte ConnectInfo
 * envelope, over the bootstrap) go through unpackInfo<SocketConnectInfo> (transport.h) and
 * checkSocketConnectInfo (transport/socket/socket_transport.cc) exactly as SocketSendComm /
 * SocketRecvComm::connect use them, and:
 *  - nothing crashes or reads out of bounds (ASan, UBSan), whatever the bytes;
 *  - unpackInfo accepts exactly the envelopes with the socket transport's id and
 *    sizeof(SocketConnectInfo), and then copies the payload unchanged;
 *  - checkSocketConnectInfo accepts exactly: stepBytes equal to ours and 1..kMaxSocketsPerConn
 *    sockets (the send side's view); the receive side's view (nsocks forced to 1, as
 *    SocketRecvComm::connect does) depends on stepBytes only;
 *  - what connect() then does with an accepted address (port(), toString() for its log line)
 *    is safe for any address bytes.
 * Input: bytes 0..255 are the envelope (zero-padded when shorter); byte 256, when present,
 * picks our step size as 1 << (b % 64) (default 512 KiB, the default TCCL_BUFFSIZE / 8).
 *
 * Built from the latest stage's sources (TCCL_FUZZ_STAGE, see CMakeLists.txt): socket_transport.cc
 * and common/. Its other dependencies, allocConnectorFifo and freeConnectorFifo (transport.cc,
 * which would pull in the whole library) and traceProxyStep (trace.cc, the step timeline), are
 * never reached from the functions fuzzed here; they are defined below to abort if that ever
 * changes.
 *
 * NCCL counterpart: none (NCCL trusts its peers' connect info).
 * Added in: reliability (tests/fuzz), for stage 2 and every later stage.
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "trace.h"
#include "transport.h"
#include "transport/socket/socket_transport.h"

namespace tccl {
// Link seams: socket_transport.cc's setup()/free()/progress() call these; the fuzzer never does.
tcclResult_t allocConnectorFifo(CommContext&, Connector&) { abort(); }
void freeConnectorFifo(Connector&) { abort(); }
void traceProxyStep(const CommContext&, int, int, bool, uint64_t, int64_t, uint64_t) { abort(); }
}  // namespace tccl

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tccl;
  ConnectInfo in;
  memset(&in, 0, sizeof(in));
  memcpy(&in, data, size < sizeof(in) ? size : sizeof(in));
  const uint64_t ours = size > sizeof(in) ? uint64_t{1} << (data[sizeof(in)] % 64) : 512 << 10;

  SocketConnectInfo peer;
  const bool envelopeOk =
      in.transport == uint32_t(TransportId::kSocket) && in.size == sizeof(SocketConnectInfo);
  const tcclResult_t unpacked = unpackInfo(TransportId::kSocket, in, &peer);
  if ((unpacked == tcclSuccess) != envelopeOk) abort();
  if (unpacked != tcclSuccess) return 0;
  if (memcmp(&peer, in.payload, sizeof(peer)) != 0) abort();

  // The send side checks the receiver's info as it is.
  const bool sendOk =
      peer.stepBytes == ours && peer.nsocks >= 1 && peer.nsocks <= kMaxSocketsPerConn;
  if ((checkSocketConnectInfo(peer, ours) == tcclSuccess) != sendOk) abort();
  // The receive side checks the sender's info with nsocks forced to 1.
  const SocketConnectInfo forced{peer.addr, peer.stepBytes, 1, peer.rank};
  if ((checkSocketConnectInfo(forced, ours) == tcclSuccess) != (peer.stepBytes == ours)) abort();

  if (sendOk) {
    // What SocketSendComm::connect does with the address before and after connecting.
    (void)peer.addr.port();
    (void)peer.addr.toString();
  }
  return 0;
}
