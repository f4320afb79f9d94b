/*
 * transport/net/gdr.cc: the CUDA calls of GPUDirect RDMA. See gdr.h.
 *
 * Added in: stage 6.
 */
#include "transport/net/gdr.h"

#include "tccl/common/param.h"

#if TCCL_HAVE_CUDA
#include <cuda.h>  // the driver API's types only: its calls are reached through the runtime
#include <cuda_runtime.h>
#endif

namespace tccl {

TCCL_PARAM(NetGdrEnable, "NET_GDR_ENABLE", 0)

int64_t netGdrEnabled() { return tcclParamNetGdrEnable(); }

#if TCCL_HAVE_CUDA

namespace {

constexpr size_t kGdrPage = size_t(2) << 20;  // cudaMalloc's large-allocation granularity

using GetHandleFn = CUresult (*)(void* handle, CUdeviceptr dptr, size_t size,
                                 CUmemRangeHandleType type, unsigned long long flags);
using GetAttributeFn = CUresult (*)(int* value, CUdevice_attribute attr, CUdevice dev);

/// A driver call, through the runtime's entry-point lookup: the library links only the static
/// runtime, never libcuda, so the driver's calls are found at run time (NCCL's cudawrap does
/// the same). Null when this driver lacks it. `since`: the CUDA version that added it.
void* driverCall(const char* name, unsigned since) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, since, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return p;
}

GetHandleFn getHandleFn() {
  static const auto fn =
      reinterpret_cast<GetHandleFn>(driverCall("cuMemGetHandleForAddressRange", 11070));
  return fn;
}

}  // namespace

bool gdrDmabufSupported(int dev, std::string* why) {
  if (dev < 0) {
    *why = "the communicator has no GPU";
    return false;
  }
  // The runtime has no name for this attribute (it is "reserved" there): ask the driver.
  static const auto getAttribute =
      reinterpret_cast<GetAttributeFn>(driverCall("cuDeviceGetAttribute", 2000));
  if (getAttribute == nullptr || getHandleFn() == nullptr) {
    *why = "the GPU driver has no cuMemGetHandleForAddressRange";
    return false;
  }
  int attr = 0;
  if (getAttribute(&attr, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, CUdevice(dev)) !=
          CUDA_SUCCESS ||
      !attr) {
    // The open GPU kernel modules (and a Linux kernel with dma-buf) are needed.
    *why = "the GPU driver cannot export its memory as a dma-buf "
           "(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)";
    return false;
  }
  return true;
}

tcclResult_t gdrExportDmabuf(void* ptr, size_t bytes, int* fd) {
  *fd = -1;
  GetHandleFn fn = getHandleFn();
  if (fn == nullptr) {
    TCCL_WARN("GPUDirect RDMA: the GPU driver has no cuMemGetHandleForAddressRange");
    return tcclSystemError;
  }
  const CUresult r = fn(fd, CUdeviceptr(reinterpret_cast<uintptr_t>(ptr)), bytes,
                        CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (r != CUDA_SUCCESS) {
    TCCL_WARN("GPUDirect RDMA: cuMemGetHandleForAddressRange(%p, %zu bytes) failed: CUresult %d",
              ptr, bytes, int(r));
    *fd = -1;
    return tcclUnhandledCudaError;
  }
  return tcclSuccess;
}

tcclResult_t gdrFlush(int dev) {
  // The proxy thread has no current device of its own: name it (cheap once set).
  cudaError_t e = cudaSetDevice(dev);
  // Target: this device's memory; scope: visible to its own work (the kernel that reads the
  // slot next), the only reader.
  if (e == cudaSuccess) {
    e = cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                           cudaFlushGPUDirectRDMAWritesToOwner);
  }
  if (e != cudaSuccess) {
    TCCL_WARN("GPUDirect RDMA: flushing device %d's received writes failed: %s", dev,
              cudaGetErrorString(e));
    return tcclUnhandledCudaError;
  }
  return tcclSuccess;
}

tcclResult_t gdrAlloc(int dev, size_t bytes, void** ptr, size_t* allocated) {
  *ptr = nullptr;
  *allocated = (bytes + kGdrPage - 1) / kGdrPage * kGdrPage;
  cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess) e = cudaMalloc(ptr, *allocated);
  if (e != cudaSuccess) {
    TCCL_WARN("GPUDirect RDMA: cudaMalloc of %zu bytes on device %d failed: %s", *allocated,
              dev, cudaGetErrorString(e));
    *ptr = nullptr;
    return tcclUnhandledCudaError;
  }
  TCCL_INFO(kAlloc, "GPUDirect RDMA slots: %zu bytes of device %d at %p", *allocated, dev, *ptr);
  return tcclSuccess;
}

void gdrFree(void* ptr) {
  if (ptr != nullptr) cudaFree(ptr);
}

#else  // a build without CUDA: no GPU, so never asked for more than the probe

bool gdrDmabufSupported(int, std::string* why) {
  *why = "this build has no CUDA";
  return false;
}
tcclResult_t gdrExportDmabuf(void*, size_t, int* fd) {
  *fd = -1;
  TCCL_WARN("GPUDirect RDMA: this build has no CUDA");
  return tcclInvalidUsage;
}
tcclResult_t gdrFlush(int) { return tcclInvalidUsage; }
tcclResult_t gdrAlloc(int, size_t, void** ptr, size_t* allocated) {
  *ptr = nullptr;
  *allocated = 0;
  TCCL_WARN("GPUDirect RDMA: this build has no CUDA");
  return tcclInvalidUsage;
}
void gdrFree(void*) {}

#endif

}  // namespace tccl
