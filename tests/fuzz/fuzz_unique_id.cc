/*
 * tests/fuzz/fuzz_unique_id.cc: fuzzes decodeUniqueId.
 *
 * What it checks: decoding any 128 bytes never crashes, and whatever it accepts is canonical:
 * encoding the decoded id gives back the same 128 bytes (so no two ids mean the same thing and
 * no byte is ignored). Because a random checksum almost never matches, an input whose byte 128
 * is odd gets a correct checksum written in first; that lets the fuzzer reach the field checks
 * behind it.
 *
 * NCCL counterpart: none.
 * Added in: foundation (common/).
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "tccl/common/bootstrap.h"

namespace {
// The id's checksum: FNV-1a 64 over bytes 0..119, stored little endian at 120.
void fixChecksum(uint8_t* id) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < tccl::kUniqueIdBytes - 8; ++i) h = (h ^ id[i]) * 1099511628211ull;
  for (int i = 0; i < 8; ++i) id[tccl::kUniqueIdBytes - 8 + i] = static_cast<uint8_t>(h >> (8 * i));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tccl;
  uint8_t id[kUniqueIdBytes] = {};
  memcpy(id, data, size < kUniqueIdBytes ? size : kUniqueIdBytes);
  if (size > kUniqueIdBytes && (data[kUniqueIdBytes] & 1)) fixChecksum(id);

  UniqueIdData d;
  if (decodeUniqueId(id, &d) != tcclSuccess) return 0;
  if (!d.root.valid() || d.root.port() == 0) abort();
  uint8_t again[kUniqueIdBytes];
  if (encodeUniqueId(d, again) != tcclSuccess) abort();
  if (memcmp(id, again, kUniqueIdBytes) != 0) abort();
  (void)d.root.toString();
  return 0;
}
