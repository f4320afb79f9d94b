/*
 * transport/net/ib/ibvwrap.h: the verbs calls the IB Net makes, as a table of functions.
 *
 * What it is: the seam between tccl and libibverbs. The IB Net (net_ib.h) calls verbs only
 * through an IbvApi, which comes from one of two places:
 *
 *   ibvLoad()              libibverbs.so.1, opened with dlopen at run time: a machine without
 *                          rdma-core still runs tccl (over sockets), and a build needs only
 *                          the headers, never the library;
 *   tests/net/fake_verbs   an in-process verbs simulator: devices, QPs with the real state
 *                          machine, RDMA writes between them, injected faults -- so the IB Net
 *                          is unit-tested on any machine, the CI one included.
 *
 * Three of verbs' calls are inline functions in verbs.h that jump through the provider's ops
 * table (ibv_post_send, ibv_post_recv, ibv_poll_cq): they need no symbol from the library, and
 * ibvLoad points at small functions that call them. ibv_query_port is a macro around an inline
 * that falls back to the exported symbol: ibvLoad takes the symbol itself. The GID's type
 * (RoCE v1 or v2), which GID selection needs, is read from sysfs as NCCL does.
 *
 * Invariants: every field of a loaded IbvApi is set (an optional call the library lacks, such
 * as ibv_reg_dmabuf_mr before rdma-core 34, points at a function that fails with EOPNOTSUPP);
 * the library is opened once per process and never closed.
 *
 * NCCL counterpart: src/misc/ibvwrap.cc, src/include/ibvwrap.h (wrap_ibv_*), ibvsymbols.cc.
 * Added in: stage 6.
 */
#ifndef TCCL_TRANSPORT_NET_IB_IBVWRAP_H_
#define TCCL_TRANSPORT_NET_IB_IBVWRAP_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "core.h"

namespace tccl {

/// GID types, as sysfs names them (gid_attrs/types/<index>).
enum class GidType { kUnknown, kIbRoceV1, kRoceV2 };

struct IbvApi {
  ibv_device** (*getDeviceList)(int* num);
  void (*freeDeviceList)(ibv_device** list);
  const char* (*getDeviceName)(ibv_device* device);
  ibv_context* (*openDevice)(ibv_device* device);
  int (*closeDevice)(ibv_context* context);
  int (*queryDevice)(ibv_context* context, ibv_device_attr* attr);
  int (*queryPort)(ibv_context* context, uint8_t port, ibv_port_attr* attr);
  int (*queryGid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  /// The type of GID `index` of `port` (sysfs); kUnknown when it cannot be read.
  GidType (*queryGidType)(ibv_context* context, uint8_t port, int index);
  ibv_pd* (*allocPd)(ibv_context* context);
  int (*deallocPd)(ibv_pd* pd);
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access);
  /// GPU memory by dma-buf (GPUDirect RDMA); errno EOPNOTSUPP where the library or the device
  /// cannot (Soft-RoCE).
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                         int access);
  int (*deregMr)(ibv_mr* mr);
  ibv_cq* (*createCq)(ibv_context* context, int cqe, void* cqContext,
                      ibv_comp_channel* channel, int vector);
  int (*destroyCq)(ibv_cq* cq);
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroyQp)(ibv_qp* qp);
  int (*postSend)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
  int (*postRecv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
  int (*pollCq)(ibv_cq* cq, int n, ibv_wc* wc);
  const char* (*wcStatusStr)(ibv_wc_status status);
};

/// Opens libibverbs.so.1 (once) and fills *api. On failure returns tcclSystemError with *why
/// saying what is missing ("libibverbs.so.1: cannot open shared object file..."); nothing is
/// logged as a warning: no verbs is a normal machine.
tcclResult_t ibvLoad(IbvApi* api, std::string* why);

/// "transport retry counter exceeded (12)": a completion status in words, with its number.
std::string wcStatusText(const IbvApi& api, ibv_wc_status status);

}  // namespace tccl

#endif  // TCCL_TRANSPORT_NET_IB_IBVWRAP_H_
