/*
 * tests/fuzz/fuzz_net_connect_info.cc: fuzzes the network transport's connection info and
 * the socket Net's handle inside it (stage 6 on; stages 1 to 5: fuzz_socket_connect_info).
 *
 * What it checks: the bytes a peer sends during connection setup (a 256-byte ConnectInfo
 * envelope, over the bootstrap) go through unpackInfo<NetConnectInfo> (transport.h),
 * checkNetConnectInfo (transport/net/net_transport.cc) and, for the handle the receiver put in
 * it, checkSocketNetHandle (transport/net/socket/net_socket.cc), exactly as
 * NetTransportSend::connect and SocketNet::connect use them, and:
 *  - nothing crashes or reads out of bounds (ASan, UBSan), whatever the bytes;
 *  - unpackInfo accepts exactly the envelopes with the network transport's id and
 *    sizeof(NetConnectInfo), and then copies the payload unchanged;
 *  - checkNetConnectInfo accepts exactly a step size equal to ours;
 *  - checkSocketNetHandle accepts exactly: the socket handle's magic, 1..kMaxSocketsPerConn
 *    sockets and an address whose length is set and fits its storage;
 *  - what connect() then does with an accepted address (port(), toString() for its log line)
 *    is safe for any address bytes.
 * Input: bytes 0..255 are the envelope (zero-padded when shorter); byte 256, when present,
 * picks our step size as 1 << (b % 64) (default 512 KiB, the default TCCL_BUFFSIZE / 8).
 *
 * Built from the latest stage's sources (TCCL_FUZZ_STAGE, see CMakeLists.txt): the two files
 * above, gdr.cc (without CUDA) and common/. Their other dependencies -- the FIFO allocation (transport.cc, which would
 * pull in the whole library) and the step timeline (trace.cc) -- are never reached from the
 * functions fuzzed here; they are defined below to abort if that ever changes.
 *
 * NCCL counterpart: none (NCCL trusts its peers' connect info).
 * Added in: stage 6 (tests/fuzz).
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "trace.h"
#include "transport.h"
#include "transport/net/net_transport.h"
#include "transport/net/socket/net_socket.h"

namespace tccl {
// Link seams: net_transport.cc's setup()/free()/progress() call these; the fuzzer never does.
tcclResult_t allocConnectorFifo(CommContext&, Connector&, bool) { abort(); }
void freeConnectorFifo(Connector&) { abort(); }
void traceProxyStep(const CommContext&, int, int, bool, uint64_t, int64_t, uint64_t) { abort(); }
}  // namespace tccl

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tccl;
  ConnectInfo in;
  memset(&in, 0, sizeof(in));
  memcpy(&in, data, size < sizeof(in) ? size : sizeof(in));
  const uint64_t ours = size > sizeof(in) ? uint64_t{1} << (data[sizeof(in)] % 64) : 512 << 10;

  NetConnectInfo peer;
  const bool envelopeOk =
      in.transport == uint32_t(TransportId::kNet) && in.size == sizeof(NetConnectInfo);
  const tcclResult_t unpacked = unpackInfo(TransportId::kNet, in, &peer);
  if ((unpacked == tcclSuccess) != envelopeOk) abort();
  if (unpacked != tcclSuccess) return 0;
  if (memcmp(&peer, in.payload, sizeof(peer)) != 0) abort();
  if ((checkNetConnectInfo(peer, ours) == tcclSuccess) != (peer.stepBytes == ours)) abort();

  // The sender reads the receiver's handle as the socket Net's (SocketNet::connect).
  SocketNetHandle h;
  memcpy(&h, peer.handle.bytes, sizeof(h));
  const bool handleOk = h.magic == kSocketNetHandleMagic && h.nsocks >= 1 &&
                        h.nsocks <= kMaxSocketsPerConn && h.addr.len != 0 &&
                        h.addr.len <= sizeof(h.addr.storage);
  if ((checkSocketNetHandle(h) == tcclSuccess) != handleOk) abort();
  if (handleOk) {
    // What SocketNet::connect does with the address before and after connecting.
    (void)h.addr.port();
    (void)h.addr.toString();
  }
  return 0;
}
