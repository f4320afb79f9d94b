/*
 * common/src/unique_id.cc: the opaque unique id and the ways to obtain one.
 *
 * What it is: the 128 bytes that tcclGetUniqueId returns and every rank passes to
 * tcclCommInitRank. They name the root's address and the communicator's secret. Three
 * sources:
 *   - bootstrapGetUniqueId: starts a root listener thread in this process (random secret), or,
 *     with TCCL_COMM_ID=host:port, names that address (rank 0 starts the root there at init);
 *   - bootstrapIdFromEnv: torchrun's MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE.
 * Ids that every rank builds on its own cannot carry a random secret, so theirs is derived
 * from the address text and TCCL_BOOTSTRAP_SECRET (set it to keep strangers out).
 *
 * Wire layout (little endian), 128 bytes:
 *    0 magic u32 | 4 version u16 | 6 flags u16 (bit 0: startRoot) | 8 secret u64
 *   16 family u16 | 18 port u16 | 20 address 16 bytes | 36 IPv6 scope u32 | 40..119 zero
 *  120 checksum u64 (FNV-1a of bytes 0..119)
 * Invariant: decode accepts only what encode produces; anything else is a WARN and
 * tcclInvalidArgument (an id that is garbage, truncated, or from another library).
 *
 * NCCL counterpart: src/bootstrap.cc (bootstrapGetUniqueId, ncclBootstrapHandle),
 * src/init.cc (NCCL_COMM_ID).
 * Added in: foundation (common/).
 */
#include <arpa/inet.h>

#include <cinttypes>
#include <cstdlib>
#include <cstring>

#include "bootstrap_internal.h"
#include "tccl/common/debug.h"

namespace tccl {
namespace {

constexpr uint32_t kIdMagic = 0x44494354;  // "TCID"
constexpr uint16_t kIdVersion = 1;
constexpr size_t kChecksumOffset = kUniqueIdBytes - 8;
static_assert(kChecksumOffset >= 40, "the fields must fit before the checksum");

uint64_t fnv1a(const uint8_t* p, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void put(uint8_t* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

uint64_t deriveSecret(const std::string& addressText) {
  std::string text = "tccl-bootstrap:" + addressText + "|" + getEnvString("TCCL_BOOTSTRAP_SECRET");
  uint64_t h = fnv1a(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  // splitmix64 finalizer: spreads the bits so similar addresses give unrelated secrets.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

tcclResult_t encodeUniqueId(const UniqueIdData& data, void* id) {
  TCCL_ARG_CHECK(id != nullptr, "encodeUniqueId: id is null");
  int family = data.root.family();
  TCCL_ARG_CHECK(data.root.valid() && (family == AF_INET || family == AF_INET6),
                 "encodeUniqueId: the root address is not IPv4 or IPv6");
  TCCL_ARG_CHECK(data.root.port() != 0, "encodeUniqueId: the root address has no port");
  uint8_t* p = static_cast<uint8_t*>(id);
  memset(p, 0, kUniqueIdBytes);
  put(p + 0, kIdMagic, 4);
  put(p + 4, kIdVersion, 2);
  put(p + 6, data.startRoot ? 1 : 0, 2);
  put(p + 8, data.secret, 8);
  put(p + 16, static_cast<uint64_t>(family), 2);
  put(p + 18, data.root.port(), 2);
  if (family == AF_INET) {
    memcpy(p + 20, &reinterpret_cast<const sockaddr_in*>(&data.root.storage)->sin_addr, 4);
  } else {
    const auto* sa = reinterpret_cast<const sockaddr_in6*>(&data.root.storage);
    memcpy(p + 20, &sa->sin6_addr, 16);
    put(p + 36, sa->sin6_scope_id, 4);
  }
  put(p + kChecksumOffset, fnv1a(p, kChecksumOffset), 8);
  return tcclSuccess;
}

tcclResult_t decodeUniqueId(const void* id, UniqueIdData* out) {
  TCCL_ARG_CHECK(id != nullptr && out != nullptr, "decodeUniqueId: null argument");
  const uint8_t* p = static_cast<const uint8_t*>(id);
  TCCL_ARG_CHECK(get(p, 4) == kIdMagic,
                 "invalid unique id: bad magic 0x%08" PRIx64 " (not made by tcclGetUniqueId?)",
                 get(p, 4));
  TCCL_ARG_CHECK(get(p + 4, 2) == kIdVersion,
                 "invalid unique id: version %" PRIu64 " (this library reads version %d)",
                 get(p + 4, 2), kIdVersion);
  TCCL_ARG_CHECK(get(p + kChecksumOffset, 8) == fnv1a(p, kChecksumOffset),
                 "invalid unique id: checksum mismatch (the id was corrupted in transit)");
  uint64_t flags = get(p + 6, 2);
  uint64_t family = get(p + 16, 2);
  uint16_t port = static_cast<uint16_t>(get(p + 18, 2));
  TCCL_ARG_CHECK(flags <= 1, "invalid unique id: unknown flags 0x%" PRIx64, flags);
  TCCL_ARG_CHECK(family == AF_INET || family == AF_INET6,
                 "invalid unique id: address family %" PRIu64, family);
  TCCL_ARG_CHECK(port != 0, "invalid unique id: root port 0");
  for (size_t i = 40; i < kChecksumOffset; ++i)
    TCCL_ARG_CHECK(p[i] == 0, "invalid unique id: non-zero reserved byte %zu", i);

  UniqueIdData data;
  if (family == AF_INET) {
    auto* sa = reinterpret_cast<sockaddr_in*>(&data.root.storage);
    sa->sin_family = AF_INET;
    memcpy(&sa->sin_addr, p + 20, 4);
    for (int i = 24; i < 40; ++i)
      TCCL_ARG_CHECK(p[i] == 0, "invalid unique id: IPv4 address with trailing bytes");
    data.root.len = sizeof(sockaddr_in);
  } else {
    auto* sa = reinterpret_cast<sockaddr_in6*>(&data.root.storage);
    sa->sin6_family = AF_INET6;
    memcpy(&sa->sin6_addr, p + 20, 16);
    sa->sin6_scope_id = static_cast<uint32_t>(get(p + 36, 4));
    data.root.len = sizeof(sockaddr_in6);
  }
  data.root.setPort(port);
  data.secret = get(p + 8, 8);
  data.startRoot = flags == 1;
  *out = data;
  return tcclSuccess;
}

tcclResult_t bootstrapGetUniqueId(void* id) {
  TCCL_ARG_CHECK(id != nullptr, "tcclGetUniqueId: id is null");
  UniqueIdData data;
  std::string commId = getEnvString("TCCL_COMM_ID");
  if (!commId.empty()) {
    // Every rank may compute this id itself: it depends only on the environment.
    TCCL_CHECK(SocketAddress::parse(commId, &data.root));
    TCCL_ARG_CHECK(data.root.port() != 0, "TCCL_COMM_ID=%s has no port (expected host:port)",
                   commId.c_str());
    data.secret = deriveSecret(commId);
    data.startRoot = true;
    TCCL_INFO(kBootstrap, "unique id from TCCL_COMM_ID=%s (rank 0 starts the root there)",
              commId.c_str());
    return encodeUniqueId(data, id);
  }
  return bootstrapNewRoot(id);
}

tcclResult_t bootstrapNewRoot(void* id) {
  TCCL_ARG_CHECK(id != nullptr, "bootstrapNewRoot: id is null");
  UniqueIdData data;
  SocketAddress local;
  TCCL_CHECK(findInterfaceAddress(&local));
  Socket listener;
  TCCL_CHECK(listener.listen(local, &data.root));
  data.secret = randomU64();
  TCCL_CHECK(bootstrapRootStart(std::move(listener), data.secret));
  TCCL_INFO(kBootstrap, "bootstrap root listening on %s", data.root.toString().c_str());
  return encodeUniqueId(data, id);
}

namespace {
// Parses a whole decimal integer in [lo, hi]; false otherwise.
bool parseEnvInt(const char* text, long lo, long hi, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}
}  // namespace

tcclResult_t bootstrapIdFromEnv(void* id, int* rank, int* nranks) {
  TCCL_ARG_CHECK(id != nullptr && rank != nullptr && nranks != nullptr,
                 "bootstrapIdFromEnv: null argument");
  const char* names[] = {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  std::string missing;
  for (const char* n : names)
    if (getEnvString(n).empty()) missing += std::string(missing.empty() ? "" : ", ") + n;
  TCCL_ARG_CHECK(missing.empty(),
                 "bootstrap from the environment: %s not set (torchrun sets "
                 "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)",
                 missing.c_str());
  std::string rankText = getEnvString("RANK"), sizeText = getEnvString("WORLD_SIZE");
  int worldSize = 0, myRank = 0;
  TCCL_ARG_CHECK(parseEnvInt(sizeText.c_str(), 1, 1 << 24, &worldSize),
                 "WORLD_SIZE=%s is not a positive integer", sizeText.c_str());
  TCCL_ARG_CHECK(parseEnvInt(rankText.c_str(), 0, worldSize - 1, &myRank),
                 "RANK=%s is not in [0, WORLD_SIZE=%d)", rankText.c_str(), worldSize);
  std::string host = getEnvString("MASTER_ADDR"), port = getEnvString("MASTER_PORT");
  // A bare IPv6 literal needs brackets before ":port".
  bool bareV6 = host.find(':') != std::string::npos && host[0] != '[';
  std::string text = (bareV6 ? "[" + host + "]" : host) + ":" + port;
  UniqueIdData data;
  TCCL_CHECK(SocketAddress::parse(text, &data.root));
  TCCL_ARG_CHECK(data.root.port() != 0, "MASTER_PORT=%s: port 0 is not usable", port.c_str());
  data.secret = deriveSecret(text);
  data.startRoot = true;
  TCCL_CHECK(encodeUniqueId(data, id));
  *rank = myRank;
  *nranks = worldSize;
  TCCL_INFO(kBootstrap, "unique id from the environment: root %s, rank %d of %d", text.c_str(),
            myRank, worldSize);
  return tcclSuccess;
}

}  // namespace tccl
