/*
 * device/word_pack.h: a user buffer seen as 8-byte words, for the protocols that put data into
 * flagged lines (LL: one word per 16-byte line; LL128: fifteen per 128-byte line).
 *
 * What it is: word i of a buffer of m elements of T holds elements [i * 8/sizeof(T), ...),
 * cut at m; loadWord and storeWord move one word between the buffer and a register, and
 * combineWords applies a reduction element by element to two words. A word that runs past m
 * (the last of a message) moves element by element, as does any word when the buffer is not
 * 8-byte aligned: user buffers may start anywhere a T may.
 *
 * Invariants: storeWord never writes an element at or beyond m; loadWord gives zero elements
 * there (they travel in the line, and the receiver's storeWord drops them again).
 *
 * NCCL counterpart: the loadUserData/storeData paths of src/device/prims_ll.h and
 * prims_ll128.h (NCCL packs whole 16-byte vectors and handles the unaligned edges apart).
 * Added in: stage 5.
 */
#ifndef TCCL_DEVICE_WORD_PACK_H_
#define TCCL_DEVICE_WORD_PACK_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "device/fifo.h"

namespace tccl {

template <typename T>
struct WordPack {
  static constexpr int kEltPerWord = int(8 / sizeof(T));
  static_assert(sizeof(T) <= 8 && 8 % sizeof(T) == 0, "a word packs whole elements");

  /// Word i of p (m elements in all): one load when p is aligned and the word is whole.
  TCCL_HOST_DEVICE static uint64_t load(const T* p, size_t i, size_t m, bool aligned) {
    uint64_t v = 0;
    const size_t first = i * kEltPerWord;
    if (aligned && first + kEltPerWord <= m) return *reinterpret_cast<const uint64_t*>(p + first);
    T e[kEltPerWord];
    memcpy(e, &v, sizeof(v));
    for (int k = 0; k < kEltPerWord && first + k < m; k++) e[k] = p[first + k];
    memcpy(&v, e, sizeof(v));
    return v;
  }
  TCCL_HOST_DEVICE static void store(T* p, size_t i, size_t m, bool aligned, uint64_t v) {
    const size_t first = i * kEltPerWord;
    if (aligned && first + kEltPerWord <= m) {
      *reinterpret_cast<uint64_t*>(p + first) = v;
      return;
    }
    T e[kEltPerWord];
    memcpy(e, &v, sizeof(v));
    for (int k = 0; k < kEltPerWord && first + k < m; k++) p[first + k] = e[k];
  }
  /// reduceElem's formula (reduce_copy.h) on the elements of two words: the received partial
  /// result (if any) joined by this rank's own input (if any, through pre()), then post().
  template <typename Fn>
  TCCL_HOST_DEVICE static uint64_t combine(const Fn& fn, uint64_t recvd, uint64_t mine,
                                           bool hasRecv, bool hasUser, bool postOp) {
    T x[kEltPerWord], y[kEltPerWord];
    memcpy(x, &recvd, sizeof(x));
    memcpy(y, &mine, sizeof(y));
    for (int k = 0; k < kEltPerWord; k++) {
      T v = hasRecv ? (hasUser ? fn(x[k], fn.pre(y[k])) : x[k]) : fn.pre(y[k]);
      x[k] = postOp ? fn.post(v) : v;
    }
    uint64_t out;
    memcpy(&out, x, sizeof(out));
    return out;
  }
};

}  // namespace tccl

#endif  // TCCL_DEVICE_WORD_PACK_H_
