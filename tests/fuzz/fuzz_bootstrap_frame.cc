/*
 * tests/fuzz/fuzz_bootstrap_frame.cc: fuzzes the validation of bootstrap message frames.
 *
 * What it checks: parseBootstrapFrame (checkBootstrapHeader + type + exact payload length),
 * the same checks a rank's receiver applies before it reads or allocates a payload, never
 * crashes, never reads past the buffer (ASan), and only accepts frames that are consistent:
 * rank in range, secret right, payload exactly header.size bytes inside the buffer.
 * Input: byte 0 picks nranks (1..256), the rest is the frame. The secret is kSecret (the
 * seeds in corpus/fuzz_bootstrap_frame carry it).
 *
 * NCCL counterpart: none.
 * Added in: foundation (common/).
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bootstrap_internal.h"

namespace {
constexpr uint64_t kSecret = 0x0123456789abcdefull;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tccl;
  if (size < 1) return 0;
  int nranks = data[0] + 1;
  const uint8_t* frame = data + 1;
  size_t len = size - 1;

  BootstrapHeader h;
  const void* payload = nullptr;
  if (parseBootstrapFrame(frame, len, kSecret, nranks, &h, &payload) == tcclSuccess) {
    // Whatever was accepted must be exactly what the checks promise.
    if (h.magic != kBootstrapMagic || h.secret != kSecret) abort();
    if (h.rank < 0 || h.rank >= nranks) abort();
    if (h.size > kMaxBootstrapMessage || h.size != len - sizeof(h)) abort();
    const uint8_t* p = static_cast<const uint8_t*>(payload);
    if (p != frame + sizeof(h)) abort();
    volatile uint8_t sum = 0;
    for (uint64_t i = 0; i < h.size; ++i) sum += p[i];  // ASan checks every byte is ours
  }
  // The header check alone, as the receiver and the root call it, with several bounds.
  if (len >= sizeof(BootstrapHeader)) {
    memcpy(&h, frame, sizeof(h));
    for (size_t bound : {size_t(0), sizeof(CheckinInfo), kMaxBootstrapMessage}) {
      if (checkBootstrapHeader(h, kSecret, nranks, bound) == tcclSuccess && h.size > bound) abort();
    }
  }
  return 0;
}
