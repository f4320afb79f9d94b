/*
 * cuda_wrap.h: the few CUDA runtime calls the host code needs, usable in any build.
 *
 * What it is: one place where "is there a GPU, is this pointer on it, give me mapped host
 * memory, order this stream after that one" is answered. In a build without CUDA, or on a
 * machine without a GPU, every pointer is host memory and the stream calls are no-ops; the GPU
 * executor is then never reached.
 *
 * Invariants: no CUDA header leaks into files that include this one; failures log a WARN with
 * the CUDA error string and return tcclUnhandledCudaError.
 *
 * NCCL counterpart: src/include/cudawrap.h, src/include/alloc.h (ncclCudaHostCalloc).
 * Added in: stage 1; the CUDA graph capture helpers in stage 5.
 */
#ifndef TCCL_CUDA_WRAP_H_
#define TCCL_CUDA_WRAP_H_

#include <cstddef>

#include "core.h"

namespace tccl {

/// True when this build has the GPU executor.
bool builtWithCuda();
/// The current CUDA device, or -1 when there is none (no CUDA build, no GPU, or no driver).
int currentCudaDevice();
/// Number of CUDA devices (0 without CUDA, a driver or a GPU).
int cudaDeviceCount();
/// Stage 5: a device's compute capability as major * 10 + minor (90: Hopper); 0 for -1.
int computeCapability(int dev);
/// Selects a device for this thread (no-op for -1).
tcclResult_t setCudaDevice(int dev);
/// PCI bus id of a device ("0000:3b:00.0"), "" for -1.
void cudaBusId(int dev, char* out, size_t len);

enum class MemType { kHost, kDevice };
/// Where `ptr` lives. Host memory (pageable or pinned) is kHost; device and managed memory are
/// kDevice. Without a GPU everything is kHost.
tcclResult_t pointerMemType(const void* ptr, int commDev, MemType* out);

/// Copies device (or any CUDA-visible) memory to host memory, synchronously.
tcclResult_t memcpyToHost(void* dst, const void* src, size_t bytes);

/// Zeroed host memory; pinned and mapped into the GPU's address space when `mapped` is true,
/// so a kernel can use the same pointer (UVA). Free with hostFree(ptr, mapped).
tcclResult_t hostCalloc(void** ptr, size_t bytes, bool mapped);
void hostFree(void* ptr, bool mapped);

/// Stream helpers for the GPU path (no-ops without CUDA).
struct CudaEvent;
tcclResult_t eventCreate(CudaEvent** ev);
void eventDestroy(CudaEvent* ev);
tcclResult_t eventRecord(CudaEvent* ev, cudaStream_t s);
tcclResult_t eventSynchronize(CudaEvent* ev);
tcclResult_t streamWaitEvent(cudaStream_t s, CudaEvent* ev);
tcclResult_t streamSynchronize(cudaStream_t s);
/// Runs fn(arg) on a CUDA-owned host thread once the stream reaches this point.
tcclResult_t launchHostFunc(cudaStream_t s, void (*fn)(void*), void* arg);

/// CUDA graphs (stage 5): whether `s` is being captured right now. A capture that CUDA has
/// already invalidated is an error.
tcclResult_t streamIsCapturing(cudaStream_t s, bool* capturing);
/// Stage 5: a stream's identity for the life of the context (cudaStreamGetId). Unlike the
/// handle, which a destroyed stream hands on to the next one created, it is never reused.
tcclResult_t streamId(cudaStream_t s, unsigned long long* id);
/// While it lives, this thread may allocate, register and open memory even when one of its
/// streams is being captured: connection setup inside a capture needs cudaMalloc and its
/// friends, which the default (global) capture mode forbids. NCCL switches the mode the same
/// way around its allocations (cudaThreadExchangeStreamCaptureMode). `active` false (no
/// communicator involved has a GPU): does nothing, and never starts the CUDA runtime.
class RelaxedCaptureScope {
 public:
  explicit RelaxedCaptureScope(bool active);
  ~RelaxedCaptureScope();
  RelaxedCaptureScope(const RelaxedCaptureScope&) = delete;
  RelaxedCaptureScope& operator=(const RelaxedCaptureScope&) = delete;

 private:
  bool active_ = false;
  int saved_ = 0;
};

}  // namespace tccl

#endif  // TCCL_CUDA_WRAP_H_
