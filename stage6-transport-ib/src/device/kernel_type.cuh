/*
 * device/kernel_type.cuh: the kernel of one element type.
 *
 * What it is: the body of ten translation units. CMakeLists.txt writes device/kernel_<N>.cu
 * for N = 0..9 (a tcclDataType_t value), each defining TCCL_DEVICE_DTYPE and including this
 * file, which defines tcclKernelType<N>: the executor's kernel whose reducing collectives are
 * those of type N (device/kernel_entry.cuh says why the kernel is cut this way). A PTX-only
 * build, where no ptxas runs, includes it ten times from one unit (device/kernel_types.cu).
 *
 * Invariants: TCCL_DEVICE_DTYPE names the unit's type; DevType (coll_dispatch.h) maps it to
 * the same C++ type the host executor uses for that value.
 *
 * NCCL counterpart: the .cu files that src/device/generate.py writes.
 * Added in: stage 5.
 */
#ifndef TCCL_DEVICE_DTYPE
#error "device/kernel_type.cuh is included by the generated device/kernel_<N>.cu files only"
#endif

#include "device/kernel_entry.cuh"

namespace tccl {

TCCL_DECLARE_TYPED_KERNEL(TCCL_DEVICE_DTYPE) {
  runKernel<TypedDeviceBackend<TCCL_DEVICE_DTYPE>>(batch, copies);
}

}  // namespace tccl
