/*
 * cuda_wrap.cc: implementation of cuda_wrap.h, with and without CUDA.
 *
 * Invariants: compiled as plain C++; TCCL_HAVE_CUDA decides whether the CUDA runtime is
 * linked. A machine with the CUDA build but no GPU (the CI machine) behaves like a build
 * without CUDA: currentCudaDevice() is -1.
 *
 * NCCL counterpart: src/misc/cudawrap.cc, src/include/alloc.h.
 * Added in: stage 1.
 */
#include "cuda_wrap.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if TCCL_HAVE_CUDA
#include <cuda_runtime.h>
#define TCCL_CUDA_CHECK(call)                                                   \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess) {                                                    \
      TCCL_WARN("CUDA call %s failed: %s", #call, cudaGetErrorString(e_));      \
      return tcclUnhandledCudaError;                                            \
    }                                                                           \
  } while (0)
#endif

namespace tccl {

bool builtWithCuda() { return TCCL_HAVE_CUDA != 0; }

int currentCudaDevice() {
#if TCCL_HAVE_CUDA
  int n = 0, dev = -1;
  // No driver or no device: the CUDA build runs as a host-only library.
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky "no device" error for later callers
    return -1;
  }
  if (cudaGetDevice(&dev) != cudaSuccess) return -1;
  return dev;
#else
  return -1;
#endif
}

int cudaDeviceCount() {
#if TCCL_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

int computeCapability(int dev) {
  int major = 0, minor = 0;
#if TCCL_HAVE_CUDA
  if (dev < 0 || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
#else
  (void)dev;
#endif
  return major * 10 + minor;
}

tcclResult_t setCudaDevice(int dev) {
#if TCCL_HAVE_CUDA
  if (dev >= 0) TCCL_CUDA_CHECK(cudaSetDevice(dev));
#endif
  return tcclSuccess;
}

void cudaBusId(int dev, char* out, size_t len) {
  if (len) out[0] = '\0';
#if TCCL_HAVE_CUDA
  if (dev >= 0 && cudaDeviceGetPCIBusId(out, int(len), dev) != cudaSuccess) out[0] = '\0';
#endif
}

tcclResult_t pointerMemType(const void* ptr, int commDev, MemType* out) {
  *out = MemType::kHost;
#if TCCL_HAVE_CUDA
  if (commDev < 0 || ptr == nullptr) return tcclSuccess;
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();  // an unregistered host pointer on old runtimes: plain host memory
    return tcclSuccess;
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) {
    *out = MemType::kDevice;
  }
#endif
  return tcclSuccess;
}

tcclResult_t memcpyToHost(void* dst, const void* src, size_t bytes) {
#if TCCL_HAVE_CUDA
  TCCL_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
#else
  memcpy(dst, src, bytes);
#endif
  return tcclSuccess;
}

tcclResult_t hostCalloc(void** ptr, size_t bytes, bool mapped) {
  *ptr = nullptr;
#if TCCL_HAVE_CUDA
  if (mapped) {
    // Portable: usable from every device's context; Mapped: a kernel can dereference it.
    TCCL_CUDA_CHECK(cudaHostAlloc(ptr, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(*ptr, 0, bytes);
    TCCL_INFO(kAlloc, "cudaHostAlloc %zu bytes at %p", bytes, *ptr);
    return tcclSuccess;
  }
#endif
  // 4096: slots start on page boundaries, which keeps 16-byte vector copies aligned.
  if (posix_memalign(ptr, 4096, bytes ? bytes : 1) != 0) {
    TCCL_WARN("out of host memory allocating %zu bytes", bytes);
    return tcclSystemError;
  }
  memset(*ptr, 0, bytes);
  return tcclSuccess;
}

void hostFree(void* ptr, bool mapped) {
  if (ptr == nullptr) return;
#if TCCL_HAVE_CUDA
  if (mapped) {
    cudaFreeHost(ptr);
    return;
  }
#endif
  free(ptr);
}

#if TCCL_HAVE_CUDA
struct CudaEvent {
  cudaEvent_t ev;
};
tcclResult_t eventCreate(CudaEvent** out) {
  auto* e = new CudaEvent;
  // Timing off: these events only order streams, and untimed events are cheaper.
  cudaError_t err = cudaEventCreateWithFlags(&e->ev, cudaEventDisableTiming);
  if (err != cudaSuccess) {
    delete e;
    TCCL_WARN("cudaEventCreate failed: %s", cudaGetErrorString(err));
    return tcclUnhandledCudaError;
  }
  *out = e;
  return tcclSuccess;
}
void eventDestroy(CudaEvent* e) {
  if (e) cudaEventDestroy(e->ev);
  delete e;
}
tcclResult_t eventRecord(CudaEvent* e, cudaStream_t s) {
  TCCL_CUDA_CHECK(cudaEventRecord(e->ev, s));
  return tcclSuccess;
}
tcclResult_t eventSynchronize(CudaEvent* e) {
  TCCL_CUDA_CHECK(cudaEventSynchronize(e->ev));
  return tcclSuccess;
}
tcclResult_t streamWaitEvent(cudaStream_t s, CudaEvent* e) {
  TCCL_CUDA_CHECK(cudaStreamWaitEvent(s, e->ev, 0));
  return tcclSuccess;
}
tcclResult_t streamSynchronize(cudaStream_t s) {
  TCCL_CUDA_CHECK(cudaStreamSynchronize(s));
  return tcclSuccess;
}
tcclResult_t launchHostFunc(cudaStream_t s, void (*fn)(void*), void* arg) {
  TCCL_CUDA_CHECK(cudaLaunchHostFunc(s, fn, arg));
  return tcclSuccess;
}
tcclResult_t streamIsCapturing(cudaStream_t s, bool* capturing) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  TCCL_CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  if (st == cudaStreamCaptureStatusInvalidated) {
    TCCL_WARN("stream %p: its CUDA graph capture was invalidated by an earlier call", (void*)s);
    return tcclInvalidUsage;
  }
  *capturing = st == cudaStreamCaptureStatusActive;
  return tcclSuccess;
}
tcclResult_t streamId(cudaStream_t s, unsigned long long* id) {
  TCCL_CUDA_CHECK(cudaStreamGetId(s, id));
  return tcclSuccess;
}
RelaxedCaptureScope::RelaxedCaptureScope(bool active) : active_(active) {
  if (!active_) return;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);  // swaps: `mode` now holds the old one
  saved_ = int(mode);
}
RelaxedCaptureScope::~RelaxedCaptureScope() {
  if (!active_) return;
  cudaStreamCaptureMode mode = cudaStreamCaptureMode(saved_);
  cudaThreadExchangeStreamCaptureMode(&mode);
}
#else
struct CudaEvent {};
tcclResult_t eventCreate(CudaEvent** out) {
  *out = nullptr;
  return tcclSuccess;
}
void eventDestroy(CudaEvent*) {}
tcclResult_t eventRecord(CudaEvent*, cudaStream_t) { return tcclSuccess; }
tcclResult_t eventSynchronize(CudaEvent*) { return tcclSuccess; }
tcclResult_t streamWaitEvent(cudaStream_t, CudaEvent*) { return tcclSuccess; }
tcclResult_t streamSynchronize(cudaStream_t) { return tcclSuccess; }
tcclResult_t launchHostFunc(cudaStream_t, void (*fn)(void*), void* arg) {
  fn(arg);
  return tcclSuccess;
}
tcclResult_t streamIsCapturing(cudaStream_t, bool* capturing) {
  *capturing = false;
  return tcclSuccess;
}
tcclResult_t streamId(cudaStream_t, unsigned long long* id) {
  *id = 0;
  return tcclSuccess;
}
RelaxedCaptureScope::RelaxedCaptureScope(bool) {}
RelaxedCaptureScope::~RelaxedCaptureScope() {}
#endif

}  // namespace tccl
