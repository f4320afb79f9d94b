/*
 * tests/ring/ring_buffers.h: guarded host-or-device buffers for the collective tests.
 *
 * What it is: a tccl::test::Buffer with kGuard poisoned bytes on both sides of the region
 * handed to tccl, so a test sees both "the result arrived" and "nothing outside the region was
 * written". The poison is the harness's fillPoison pattern (NaN in every floating type, values
 * no reduction of test inputs gives in the integer types), so an element nobody wrote fails
 * compare() as well as the byte-level "untouched" checks.
 *
 * Invariants:
 *  - Host Buffers are page-aligned and device Buffers 256-byte aligned, and Buffer::poison()
 *    phases the pattern from the start of the allocation; kGuard is a multiple of 8 and of 256.
 *    So the poison byte at allocation offset k is poisonByte(k), a pure function: a region can
 *    be checked for "untouched" without a copy of it.
 *  - The payload starts kGuard bytes in, so it is as aligned as the allocation; tests that
 *    want misaligned pointers offset into the payload themselves.
 *
 * NCCL counterpart: nccl-tests src/common.cu (the buffers of InitData / CheckData), in spirit.
 * Added in: stage 2.
 */
#ifndef TCCL_TESTS_RING_RING_BUFFERS_H_
#define TCCL_TESTS_RING_RING_BUFFERS_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace ring {

/// The harness's poison pattern (fillPoison) phased from an 8-aligned address: byte k of a
/// poisoned allocation is poisonByte(k); as a little-endian word, every aligned 8 bytes are
/// poisonWord().
struct PoisonPattern {
  alignas(8) uint8_t b[8];
  uint64_t word;
  PoisonPattern() {
    fillPoison(b, sizeof b);
    std::memcpy(&word, b, 8);
  }
};
inline const PoisonPattern& poisonPattern() {
  static const PoisonPattern p;
  return p;
}
inline uint8_t poisonByte(size_t k) { return poisonPattern().b[k & 7]; }

/// A host or device buffer of `bytes` usable bytes between two poisoned guards.
class CollBuffer {
 public:
  static constexpr size_t kGuard = 256;
  static constexpr size_t kChunk = size_t{4} << 20;

  CollBuffer(size_t bytes, MemKind kind) : bytes_(bytes), buf_(bytes + 2 * kGuard, kind) {
    poison();
  }
  CollBuffer(const CollBuffer&) = delete;
  CollBuffer& operator=(const CollBuffer&) = delete;

  char* data() const { return static_cast<char*>(buf_.data()) + kGuard; }
  size_t bytes() const { return bytes_; }
  size_t allocBytes() const { return buf_.bytes(); }
  MemKind kind() const { return buf_.kind(); }

  /// Copies host bytes into the payload at `offset`.
  void write(size_t offset, const void* src, size_t n) {
    if (n > 0) buf_.upload(src, n, kGuard + offset);
  }

  /// The whole allocation (guards included) as host bytes. Device buffers are downloaded; the
  /// pointer stays valid until the next call. Synchronize stream-ordered work first.
  const uint8_t* view() {
    if (buf_.kind() == MemKind::kHost) return static_cast<const uint8_t*>(buf_.data());
    host_.resize(buf_.bytes());
    buf_.download(host_.data(), host_.size());
    return host_.data();
  }

  /// Poisons guards and payload: what Buffer::poison() writes, a word at a time (a byte loop
  /// over the 256 MiB buffers of the large cases cost more than the collectives).
  void poison() {
    const size_t total = buf_.bytes();
    const size_t chunk = std::min<size_t>(total, kChunk);
    std::vector<uint64_t> words((chunk + 7) / 8, poisonPattern().word);
    if (buf_.kind() == MemKind::kHost) {
      char* p = static_cast<char*>(buf_.data());
      for (size_t off = 0; off < total; off += kChunk) {
        std::memcpy(p + off, words.data(), std::min(kChunk, total - off));
      }
      return;
    }
    for (size_t off = 0; off < total; off += kChunk) {  // kChunk is a multiple of 8: in phase
      buf_.upload(words.data(), std::min(kChunk, total - off), off);
    }
  }

  /// Index (from allocation offset `from`) of the first non-poison byte of [from, from+n) of a
  /// view, or n when the whole range is poison.
  static size_t firstNonPoison(const uint8_t* v, size_t from, size_t n) {
    size_t i = 0;
    for (; i < n && ((from + i) & 7) != 0; i++) {
      if (v[from + i] != poisonByte(from + i)) return i;
    }
    // Aligned words: the allocation (hence v) is 8-aligned, so offset and address agree.
    const uint64_t w = poisonPattern().word;
    for (; i + 8 <= n; i += 8) {
      uint64_t x;
      std::memcpy(&x, v + from + i, 8);
      if (x != w) break;
    }
    for (; i < n; i++) {
      if (v[from + i] != poisonByte(from + i)) return i;
    }
    return n;
  }

  /// Checks that allocation bytes outside [keepFrom, keepFrom+keepBytes) (payload offsets) are
  /// still poison: the guards always, and the payload around the result region when asked.
  bool untouchedOutside(const uint8_t* v, size_t keepFrom, size_t keepBytes,
                        std::string* why) const {
    const size_t lo = kGuard + keepFrom, hi = lo + keepBytes, end = buf_.bytes();
    size_t i = firstNonPoison(v, 0, lo);
    if (i != lo) return fail(why, i, "before");
    i = firstNonPoison(v, hi, end - hi);
    if (i != end - hi) return fail(why, hi + i, "after");
    return true;
  }

  /// Checks the two guards only.
  bool guardsIntact(const uint8_t* v, std::string* why) const {
    size_t i = firstNonPoison(v, 0, kGuard);
    if (i != kGuard) return fail(why, i, "before");
    const size_t hi = kGuard + bytes_;
    i = firstNonPoison(v, hi, kGuard);
    if (i != kGuard) return fail(why, hi + i, "after");
    return true;
  }

 private:
  bool fail(std::string* why, size_t allocOffset, const char* side) const {
    const long long payloadOffset = static_cast<long long>(allocOffset) - kGuard;
    *why = "byte " + std::to_string(payloadOffset) + " (of a " + std::to_string(bytes_) +
           "-byte buffer) " + side + " the region tccl may write was overwritten";
    return false;
  }

  size_t bytes_;
  Buffer buf_;
  std::vector<uint8_t> host_;
};

}  // namespace ring
}  // namespace test
}  // namespace tccl

#endif  // TCCL_TESTS_RING_RING_BUFFERS_H_
