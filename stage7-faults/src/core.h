/*
 * core.h: small definitions every host-side file of the library uses.
 *
 * What it is: the public header plus common/'s logging and knobs, element sizes, and the
 * library-wide knobs (TCCL_BUFFSIZE, ...). Nothing here has behaviour of its own.
 *
 * NCCL counterpart: src/include/core.h, src/include/comm.h's includes.
 * Added in: stage 1.
 */
#ifndef TCCL_CORE_H_
#define TCCL_CORE_H_

#include <cstddef>
#include <cstdint>

#include "tccl.h"
#include "tccl/common/debug.h"
#include "tccl/common/param.h"

// Bytes of one FIFO (all kNSteps slots) per connection, as NCCL_BUFFSIZE (NCCL: 4 MiB for the
// Simple protocol). Must be the same on every rank.
TCCL_PARAM(BuffSize, "BUFFSIZE", 4 << 20)

namespace tccl {

/// Bytes per element; 0 for an invalid type.
inline size_t typeSize(tcclDataType_t t) {
  switch (t) {
    case tcclInt8: case tcclUint8: return 1;
    case tcclFloat16: case tcclBfloat16: return 2;
    case tcclInt32: case tcclUint32: case tcclFloat32: return 4;
    case tcclInt64: case tcclUint64: case tcclFloat64: return 8;
    default: return 0;
  }
}

}  // namespace tccl

#endif  // TCCL_CORE_H_
