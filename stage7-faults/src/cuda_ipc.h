/*
 * cuda_ipc.h: the CUDA calls of the intra-node transports, usable in any build.
 *
 * What it is: what SHM and P2P need from CUDA and nothing else: registering a host mapping
 * with the GPU (so a kernel can poll and fill a FIFO in shared memory), device memory for a
 * FIFO that a peer's kernel writes, exporting it to another process with CUDA IPC, opening
 * a peer's export, and the question "can my GPU write into that one". In a build without
 * CUDA every call fails with a message (nothing reaches them there: no connector is for a
 * device then) and canAccessPeer says no.
 *
 * Invariants: as cuda_wrap.h: no CUDA header leaks out; a failure logs a WARN with the CUDA
 * error and returns tcclUnhandledCudaError. An IPC handle is an opaque 64-byte blob to
 * everything outside cuda_ipc.cc.
 *
 * NCCL counterpart: src/transport/p2p.cc (cudaIpcGetMemHandle / cuMem export, p2pMap),
 * src/transport/shm.cc and src/misc/shmutils.cc (cudaHostRegister of the shared segment),
 * src/graph/paths.cc (p2pCanConnect's peer-access check).
 * Added in: stage 5.
 */
#ifndef TCCL_CUDA_IPC_H_
#define TCCL_CUDA_IPC_H_

#include <cstddef>
#include <cstdint>

#include "core.h"

namespace tccl {

/// cudaIpcMemHandle_t's bytes (CUDA_IPC_HANDLE_SIZE), carried in a transport's ConnectInfo.
struct IpcHandle {
  uint8_t bytes[64];
};

/// Pins and maps `bytes` of host memory at `ptr` (a shared mapping) into the GPU's address
/// space. With unified addressing the kernel uses the same pointer; if this driver would give
/// it another one, we refuse (ConnInfo holds one pointer for host and kernel alike).
tcclResult_t hostRegister(void* ptr, size_t bytes);
void hostUnregister(void* ptr);

/// Zeroed device memory on the current device, and its release.
tcclResult_t deviceCalloc(void** ptr, size_t bytes);
void deviceFree(void* ptr);
/// Device memory on the current device holding a copy of `bytes` at host address `src`
/// (a connector's ConnInfo for its kernels), freed with deviceFree.
tcclResult_t deviceCopyOf(void** ptr, const void* src, size_t bytes);

/// Exports a deviceCalloc allocation (its base pointer) to other processes.
tcclResult_t ipcExport(void* ptr, IpcHandle* out);
/// Maps a peer process's export into ours (on the current device); ipcClose unmaps it.
tcclResult_t ipcOpen(const IpcHandle& handle, void** ptr);
void ipcClose(void* ptr);

/// True when a kernel on device `dev` can write into memory of the device with PCI bus id
/// `peerBusId` (the same device, or peer access over NVLink or PCIe). Enables the access.
bool canAccessPeer(int dev, const char* peerBusId);

/// True when the device with PCI bus id `peerBusId` is another GPU that device `dev` reaches
/// over NVLink. CUDA names no link type; native atomics between two GPUs are NVLink's (PCIe
/// peers lack them), which is the test used here.
bool nvlinkPeer(int dev, const char* peerBusId);

}  // namespace tccl

#endif  // TCCL_CUDA_IPC_H_
