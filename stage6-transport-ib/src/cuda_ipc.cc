/*
 * cuda_ipc.cc: the CUDA calls of the intra-node transports (cuda_ipc.h).
 *
 * What it is: thin wrappers with the project's error convention. Each says why it asks CUDA
 * for what it asks; the transports (transport/shm, transport/p2p) say when.
 *
 * NCCL counterpart: src/transport/p2p.cc, src/misc/shmutils.cc, src/graph/paths.cc.
 * Added in: stage 5.
 */
#include "cuda_ipc.h"

#include <cstring>

#if TCCL_HAVE_CUDA
#include <cuda_runtime.h>
#define TCCL_CUDA_CHECK(call)                                              \
  do {                                                                     \
    cudaError_t e_ = (call);                                               \
    if (e_ != cudaSuccess) {                                               \
      TCCL_WARN("CUDA call %s failed: %s", #call, cudaGetErrorString(e_)); \
      return tcclUnhandledCudaError;                                       \
    }                                                                      \
  } while (0)
static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(tccl::IpcHandle), "IPC handle size");
#endif

namespace tccl {

#if TCCL_HAVE_CUDA

tcclResult_t hostRegister(void* ptr, size_t bytes) {
  // Portable: every device context may use it; Mapped: kernels can dereference it.
  TCCL_CUDA_CHECK(cudaHostRegister(ptr, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  void* dev = nullptr;
  cudaError_t e = cudaHostGetDevicePointer(&dev, ptr, 0);
  if (e != cudaSuccess || dev != ptr) {
    cudaHostUnregister(ptr);
    TCCL_WARN(
        "registered host memory at %p has device address %p (%s): tccl needs unified "
        "addressing, where the two are equal",
        ptr, dev, cudaGetErrorString(e));
    return tcclUnhandledCudaError;
  }
  TCCL_INFO(kAlloc, "cudaHostRegister %zu bytes at %p", bytes, ptr);
  return tcclSuccess;
}

void hostUnregister(void* ptr) {
  if (ptr != nullptr) cudaHostUnregister(ptr);
}

// Allocates `bytes` on the current device and fills them, from `src` or with zeros, before
// returning: the peer may open this memory, or a kernel read it, as soon as connection setup
// ends, before any stream orders anything. The fill runs on a private non-blocking stream, not
// the legacy one or the whole device: the application's streams may be busy, or being
// captured into a CUDA graph, which a device-wide synchronization would wait for (or break).
static tcclResult_t deviceAllocFilled(void** ptr, size_t bytes, const void* src) {
  *ptr = nullptr;
  TCCL_CUDA_CHECK(cudaMalloc(ptr, bytes));
  cudaStream_t s = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e == cudaSuccess) {
    e = src != nullptr ? cudaMemcpyAsync(*ptr, src, bytes, cudaMemcpyHostToDevice, s)
                       : cudaMemsetAsync(*ptr, 0, bytes, s);
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (s != nullptr) cudaStreamDestroy(s);
  if (e != cudaSuccess) {
    cudaFree(*ptr);
    *ptr = nullptr;
    TCCL_WARN("cannot fill %zu bytes of device memory: %s", bytes, cudaGetErrorString(e));
    return tcclUnhandledCudaError;
  }
  TCCL_INFO(kAlloc, "cudaMalloc %zu bytes at %p", bytes, *ptr);
  return tcclSuccess;
}

tcclResult_t deviceCalloc(void** ptr, size_t bytes) {
  // Zeroed counters: a FIFO starts with head = tail = 0.
  return deviceAllocFilled(ptr, bytes, nullptr);
}

tcclResult_t deviceCopyOf(void** ptr, const void* src, size_t bytes) {
  return deviceAllocFilled(ptr, bytes, src);
}

void deviceFree(void* ptr) {
  if (ptr != nullptr) cudaFree(ptr);
}

tcclResult_t ipcExport(void* ptr, IpcHandle* out) {
  cudaIpcMemHandle_t h;
  TCCL_CUDA_CHECK(cudaIpcGetMemHandle(&h, ptr));
  memcpy(out->bytes, &h, sizeof(h));
  return tcclSuccess;
}

tcclResult_t ipcOpen(const IpcHandle& handle, void** ptr) {
  cudaIpcMemHandle_t h;
  memcpy(&h, handle.bytes, sizeof(h));
  // Lazy peer access: CUDA enables access to the exporting device on demand (the same device
  // needs none).
  TCCL_CUDA_CHECK(cudaIpcOpenMemHandle(ptr, h, cudaIpcMemLazyEnablePeerAccess));
  return tcclSuccess;
}

void ipcClose(void* ptr) {
  if (ptr != nullptr) cudaIpcCloseMemHandle(ptr);
}

bool canAccessPeer(int dev, const char* peerBusId) {
  int peer = -1;
  if (dev < 0 || cudaDeviceGetByPCIBusId(&peer, peerBusId) != cudaSuccess) {
    cudaGetLastError();  // the peer's GPU is not visible to this process
    return false;
  }
  if (peer == dev) return true;  // two processes on one GPU: IPC works within a device
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, dev, peer) != cudaSuccess || !can) return false;
  // Enabled for this process's context; "already enabled" is fine.
  if (cudaDeviceEnablePeerAccess(peer, 0) != cudaSuccess) cudaGetLastError();
  return true;
}

bool nvlinkPeer(int dev, const char* peerBusId) {
  int peer = -1;
  if (dev < 0 || cudaDeviceGetByPCIBusId(&peer, peerBusId) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  int atomics = 0;
  if (peer == dev ||
      cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, dev, peer) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return atomics != 0;
}

#else  // no CUDA: no connector is ever for a device, so none of these is reached

static tcclResult_t noCuda(const char* what) {
  TCCL_WARN("%s: this build has no CUDA", what);
  return tcclInvalidUsage;
}
tcclResult_t hostRegister(void*, size_t) { return noCuda("hostRegister"); }
void hostUnregister(void*) {}
tcclResult_t deviceCalloc(void** ptr, size_t) {
  *ptr = nullptr;
  return noCuda("deviceCalloc");
}
tcclResult_t deviceCopyOf(void** ptr, const void*, size_t) {
  *ptr = nullptr;
  return noCuda("deviceCopyOf");
}
void deviceFree(void*) {}
tcclResult_t ipcExport(void*, IpcHandle*) { return noCuda("ipcExport"); }
tcclResult_t ipcOpen(const IpcHandle&, void** ptr) {
  *ptr = nullptr;
  return noCuda("ipcOpen");
}
void ipcClose(void*) {}
bool canAccessPeer(int, const char*) { return false; }
bool nvlinkPeer(int, const char*) { return false; }

#endif

}  // namespace tccl
