/*
 * common/src/bootstrap_wire.cc: building and checking bootstrap headers.
 *
 * What it is: the validation every bootstrap byte passes before it is trusted: the header
 * check (magic, secret, sender rank, size bound) that the root and every rank's receiver
 * apply before reading a payload, the check of addresses that arrive in payloads, and
 * parseBootstrapFrame, the same checks over one message in a buffer (the fuzzer's entry).
 *
 * Invariants: pure functions of their arguments (no I/O, no allocation); every rejection is
 * a WARN saying which check failed: tcclSystemError when the bytes are not ours at all (bad
 * magic, wrong secret: another job, a scanner), tcclRemoteError when a member of the job
 * sent something malformed (rank out of range, too large, wrong length).
 *
 * NCCL counterpart: src/bootstrap.cc (the magic and size checks in bootstrapNetRecv and
 * bootstrapRoot).
 * Added in: foundation (common/).
 */
#include <cinttypes>
#include <cstring>

#include "bootstrap_internal.h"
#include "tccl/common/debug.h"

namespace tccl {

BootstrapHeader makeBootstrapHeader(uint32_t type, uint64_t secret, int rank, uint32_t tag,
                                    uint64_t size) {
  return BootstrapHeader{kBootstrapMagic, type, secret, rank, tag, size};
}

tcclResult_t checkBootstrapHeader(const BootstrapHeader& h, uint64_t secret, int nranks,
                                  size_t maxSize) {
  if (h.magic != kBootstrapMagic) {
    TCCL_WARN("bootstrap: bad magic 0x%08x (not a tccl bootstrap message)", h.magic);
    return tcclSystemError;
  }
  if (h.secret != secret) {
    TCCL_WARN("bootstrap: wrong secret from a sender claiming rank %d (another job?)", h.rank);
    return tcclSystemError;
  }
  if (h.rank < 0 || h.rank >= nranks) {
    TCCL_WARN("bootstrap: sender rank %d out of range [0, %d)", h.rank, nranks);
    return tcclRemoteError;
  }
  if (h.size > maxSize) {
    TCCL_WARN("bootstrap: message of %" PRIu64 " bytes from rank %d exceeds the bound of %zu",
              h.size, h.rank, maxSize);
    return tcclRemoteError;
  }
  return tcclSuccess;
}

tcclResult_t checkWireAddress(const SocketAddress& a) {
  bool ok = (a.family() == AF_INET && a.len == sizeof(sockaddr_in)) ||
            (a.family() == AF_INET6 && a.len == sizeof(sockaddr_in6));
  if (!ok) {
    TCCL_WARN("bootstrap: received an invalid address (family %d, length %u)", a.family(), a.len);
    return tcclRemoteError;
  }
  return tcclSuccess;
}

bool isBootstrapMessageType(uint32_t t) {
  return t == kMsgUser || t == kMsgAllGather || t == kMsgBarrier;
}

tcclResult_t parseBootstrapFrame(const void* buf, size_t len, uint64_t secret, int nranks,
                                 BootstrapHeader* header, const void** payload) {
  if (buf == nullptr || len < sizeof(BootstrapHeader)) {
    TCCL_WARN("bootstrap: truncated header (%zu of %zu bytes)", len, sizeof(BootstrapHeader));
    return tcclRemoteError;
  }
  BootstrapHeader h;
  memcpy(&h, buf, sizeof(h));  // buf may be unaligned
  TCCL_CHECK(checkBootstrapHeader(h, secret, nranks, kMaxBootstrapMessage));
  if (!isBootstrapMessageType(h.type)) {
    TCCL_WARN("bootstrap: unexpected message type %u", h.type);
    return tcclRemoteError;
  }
  size_t body = len - sizeof(h);
  if (body != h.size) {
    TCCL_WARN("bootstrap: header announces %" PRIu64 " payload bytes but %zu follow", h.size, body);
    return tcclRemoteError;
  }
  if (header != nullptr) *header = h;
  if (payload != nullptr) *payload = static_cast<const char*>(buf) + sizeof(h);
  return tcclSuccess;
}

}  // namespace tccl
