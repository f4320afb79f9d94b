/*
 * tests/p2p/p2p_buffers.h: guarded test buffers and exact-equality checks for the P2P tests.
 *
 * What it is: a buffer (host or device) with poisoned guard bytes on both sides of the region
 * handed to tccl, so a test sees both "the data arrived" and "nothing outside the region was
 * written". P2P moves bytes, so every check is exact (memcmp), never a tolerance.
 *
 * Invariants:
 *  - The poison is a pure function of the byte's offset in the whole (guarded) allocation, so a
 *    region can be checked for "untouched" without keeping a copy of it.
 *  - Expected data is fillData() of the sending rank, with a seed that names the block (so
 *    swapping two blocks is caught). fillData is tccl::test::fillInput up to kFillInputMaxCount
 *    elements; past that a byte-level hash of (rank, seed, offset), because fillInput costs
 *    ~50 ns per element (64 Mi elements: 3 s per block, too slow for CI) and P2P does not
 *    care about values, only about bytes: a random byte stream catches misplaced bytes at
 *    least as well as small integers do.
 *  - Header-only: every test executable of every stage includes it as it is.
 *
 * NCCL counterpart: nccl-tests src/common.cu (InitData / CheckData), in spirit.
 * Added in: stage 1.
 */
#ifndef TCCL_TESTS_P2P_P2P_BUFFERS_H_
#define TCCL_TESTS_P2P_P2P_BUFFERS_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tccl.h"
#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace p2p {

/// tccl's enum and the harness's enum share their values (harness.h says so).
inline tcclDataType_t toTccl(DType t) { return static_cast<tcclDataType_t>(static_cast<int>(t)); }

/// Above this many elements, fillData uses the fast byte hash instead of fillInput.
constexpr size_t kFillInputMaxCount = size_t{1} << 18;

inline uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The data rank `rank` sends in a block named `seed`: fillInput for up to kFillInputMaxCount
/// elements, else a hash of (rank, seed, byte offset), 8 bytes at a time.
inline void fillData(void* buf, size_t count, DType t, int rank, int seed) {
  if (count <= kFillInputMaxCount) {
    fillInput(buf, count, t, rank, seed);
    return;
  }
  const size_t bytes = count * dtypeSize(t);
  const uint64_t key = mix64((uint64_t(uint32_t(rank)) << 32) ^ uint32_t(seed)) ^ bytes;
  uint8_t* p = static_cast<uint8_t*>(buf);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w = mix64(key + i);
    std::memcpy(p + i, &w, 8);
  }
  uint64_t w = mix64(key + i);
  for (; i < bytes; i++, w >>= 8) p[i] = static_cast<uint8_t>(w);
}

/// Poison byte at `offset` of a guarded allocation. Large values (0x80..0xff), so they are never
/// the small integers fillInput writes, and position dependent, so a shifted copy is caught.
inline uint8_t poisonByte(size_t offset) {
  return static_cast<uint8_t>(0x80u | ((offset * 0x9du + (offset >> 7)) & 0x7fu));
}
inline void fillPoisonAt(uint8_t* dst, size_t bytes, size_t offset) {
  for (size_t i = 0; i < bytes; i++) dst[i] = poisonByte(offset + i);
}
/// Index of the first byte that is not poison, or `bytes` when all are.
inline size_t firstNonPoison(const uint8_t* p, size_t bytes, size_t offset) {
  for (size_t i = 0; i < bytes; i++)
    if (p[i] != poisonByte(offset + i)) return i;
  return bytes;
}

/// A host or device buffer of `bytes` usable bytes between two poisoned guards.
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 256;  // keeps the payload 256-byte aligned, like cudaMalloc

  GuardedBuffer(size_t bytes, MemKind kind) : bytes_(bytes), buf_(bytes + 2 * kGuard, kind) {
    poison();
  }

  void* data() { return static_cast<char*>(buf_.data()) + kGuard; }
  size_t bytes() const { return bytes_; }
  MemKind kind() const { return buf_.kind(); }

  /// Poisons guards and payload.
  void poison() {
    if (buf_.kind() == MemKind::kHost) {
      fillPoisonAt(static_cast<uint8_t*>(buf_.data()), buf_.bytes(), 0);
      return;
    }
    // Device memory: upload in chunks so a 256 MiB buffer does not need a 256 MiB staging copy.
    std::vector<uint8_t> chunk(std::min<size_t>(buf_.bytes(), kChunk));
    for (size_t off = 0; off < buf_.bytes(); off += kChunk) {
      size_t n = std::min(kChunk, buf_.bytes() - off);
      fillPoisonAt(chunk.data(), n, off);
      buf_.upload(chunk.data(), n, off);
    }
  }

  /// Writes fillData(count, t, rank, seed) at payload byte `offset`.
  void fillAt(size_t offset, size_t count, DType t, int rank, int seed) {
    size_t n = count * dtypeSize(t);
    if (n == 0) return;
    if (buf_.kind() == MemKind::kHost) {
      fillData(static_cast<char*>(data()) + offset, count, t, rank, seed);
      return;
    }
    std::vector<char> tmp(n);
    fillData(tmp.data(), count, t, rank, seed);
    buf_.upload(tmp.data(), n, kGuard + offset);
  }

  /// The whole allocation as host bytes (guards included). Device buffers are downloaded; the
  /// view stays valid until the next call. Call deviceSync() first for stream-ordered work.
  const uint8_t* view() {
    if (buf_.kind() == MemKind::kHost) return static_cast<const uint8_t*>(buf_.data());
    host_.resize(buf_.bytes());
    buf_.download(host_.data(), host_.size());
    return host_.data();
  }

  /// Checks both guards on a view(); describes the first damaged byte in *why.
  bool guardsIntact(const uint8_t* v, std::string* why) const {
    size_t i = firstNonPoison(v, kGuard, 0);
    if (i != kGuard) {
      *why = "byte " + std::to_string(kGuard - i) + " before the buffer was overwritten";
      return false;
    }
    size_t hi = kGuard + bytes_;
    i = firstNonPoison(v + hi, kGuard, hi);
    if (i != kGuard) {
      *why = "byte " + std::to_string(i) + " past the end of the " + std::to_string(bytes_) +
             "-byte buffer was overwritten";
      return false;
    }
    return true;
  }

  /// True when payload bytes [offset, offset+bytes) of a view() still hold the poison.
  bool untouched(const uint8_t* v, size_t offset, size_t bytes, std::string* why) const {
    size_t i = firstNonPoison(v + kGuard + offset, bytes, kGuard + offset);
    if (i == bytes) return true;
    *why = "byte " + std::to_string(offset + i) + " should not have been written";
    return false;
  }

 private:
  static constexpr size_t kChunk = 4u << 20;
  size_t bytes_;
  Buffer buf_;
  std::vector<uint8_t> host_;
};

/// Checks that `got` (count elements of type t) equals fillData(count, t, srcRank, seed).
/// `what` names the block in the failure message.
inline bool matchesInput(const uint8_t* got, size_t count, DType t, int srcRank, int seed,
                         const std::string& what, std::string* why) {
  size_t n = count * dtypeSize(t);
  if (n == 0) return true;
  static thread_local std::vector<char> expected;
  expected.resize(n);
  fillData(expected.data(), count, t, srcRank, seed);
  if (std::memcmp(got, expected.data(), n) == 0) return true;
  std::string detail;
  compare(got, expected.data(), count, t, 0.0, &detail);
  // Identify the first differing byte too: compare() may call two float NaN payloads equal.
  size_t b = 0;
  while (b < n && got[b] == static_cast<uint8_t>(expected[b])) b++;
  *why = what + " (" + std::to_string(count) + " x " + dtypeName(t) + " from rank " +
         std::to_string(srcRank) + "): first differing byte " + std::to_string(b) + "; " + detail;
  return false;
}

}  // namespace p2p
}  // namespace test
}  // namespace tccl

#endif  // TCCL_TESTS_P2P_P2P_BUFFERS_H_
