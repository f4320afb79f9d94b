/*
 * transport/net/gdr.h: GPUDirect RDMA -- the CUDA half of letting a NIC write GPU memory.
 *
 * What it is: with GPUDirect RDMA the network transport's receive slots for kernels live in
 * GPU memory and the NIC writes them directly, instead of into host memory that the kernel
 * then reads across PCIe. Three things are needed from CUDA, and they are here:
 *
 *   probe    does this GPU export memory as a dma-buf (cudaDevAttrDmaBufSupported; the
 *            driver's cuMemGetHandleForAddressRange must exist too)? The Net answers the
 *            other half: can it register a dma-buf (NetProperties::dmabuf)?
 *   export   a file descriptor for a range of device memory (a Linux dma-buf), which the
 *            Net hands to ibv_reg_dmabuf_mr: the NIC's driver maps the GPU pages through it.
 *   flush    once a NIC write has completed, make it visible to the GPU's own loads before the
 *            kernel is told the step is there (cudaDeviceFlushGPUDirectRDMAWrites): PCIe
 *            writes into the GPU may otherwise still be in flight when the kernel, having seen
 *            the FIFO's tail in host memory, reads the slot.
 *
 * The path is opt-in (TCCL_NET_GDR_ENABLE=1; the default, 0, stages through host memory): it
 * has run here against a fake verbs device only (tests/net/fake_verbs_lib.cc), never on a
 * real NIC; docs/chapters/stage6-transport-ib.md says what that covers and what it does not.
 * tccl flushes after every received step; NCCL 2.28 skips the flush on Hopper and later
 * unless the Net asks for it or NCCL_NET_FORCE_FLUSH=1 (ncclTopoNeedFlush).
 *
 * Invariants: every call is safe in a build without CUDA (the probe says why not); an exported
 * descriptor is the caller's to close (the MR keeps its own reference to the dma-buf).
 *
 * NCCL counterpart: src/transport/net.cc (NCCL_NET_GDR_LEVEL, the dma-buf path of
 * sendProxyConnect/recvProxyConnect), src/init.cc (dmaBufSupported, NCCL_DMABUF_ENABLE),
 * src/misc/cudawrap.cc (cuMemGetHandleForAddressRange as a driver entry point), net_ib.cc's
 * ncclIbGdrSupport/ncclIbDmaBufSupport and its flush (an RDMA read through a loopback QP;
 * tccl uses CUDA's flush call instead).
 * Added in: stage 6.
 */
#ifndef TCCL_TRANSPORT_NET_GDR_H_
#define TCCL_TRANSPORT_NET_GDR_H_

#include <cstddef>
#include <string>

#include "core.h"

namespace tccl {

/// TCCL_NET_GDR_ENABLE: 1 asks for GPUDirect RDMA where both halves can do it (default 0).
int64_t netGdrEnabled();

/// The CUDA half of the probe for device `dev`: true when it can export its memory as a
/// dma-buf; otherwise false with *why in words (for the INIT line).
bool gdrDmabufSupported(int dev, std::string* why);

/// A dma-buf file descriptor for [ptr, ptr + bytes) of device memory (both aligned to the host
/// page size). The caller closes it.
tcclResult_t gdrExportDmabuf(void* ptr, size_t bytes, int* fd);

/// Makes completed NIC writes into device `dev`'s memory visible to its kernels.
tcclResult_t gdrFlush(int dev);

/// Device memory for GPUDirect RDMA receive slots: `bytes` rounded up to whole 2 MiB pages
/// (*allocated says how much), so the dma-buf range is page-aligned. Freed with gdrFree.
tcclResult_t gdrAlloc(int dev, size_t bytes, void** ptr, size_t* allocated);
void gdrFree(void* ptr);

}  // namespace tccl

#endif  // TCCL_TRANSPORT_NET_GDR_H_
