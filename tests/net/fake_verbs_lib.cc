/*
 * tests/net/fake_verbs_lib.cc: the fake verbs device (fake_verbs.h) as a libibverbs.so.1.
 *
 * What it is: the same in-process fake, built as a shared library that exports the ibv_*
 * symbols the IB Net's loader takes (ibvwrap.cc). A test puts its directory first in
 * LD_LIBRARY_PATH, so the real library -- tccl itself, unchanged -- opens it instead of
 * rdma-core's: the whole path from tcclAllReduce through the network transport, the IB Net and
 * its QPs runs against the fake, with every rank of the test as a thread of one process (the
 * fake's "fabric" is that process).
 *
 * What a GPU adds: with FAKE_VERBS_DMABUF=1 the fake registers dma-bufs (GPUDirect RDMA), and
 * a write into or out of such a region is a CUDA copy (a private non-blocking stream: the
 * legacy stream would wait for the very kernels that wait for this write). So a GPU machine
 * without an RDMA NIC still runs the transport's GPUDirect path end to end: slots in GPU
 * memory, exported as a dma-buf, registered, written by the "NIC", flushed, read by kernels.
 *
 * Environment: FAKE_VERBS_DMABUF=1 (dma-buf support). The GID types come from sysfs in the
 * real loader, which knows no fake device: tests set TCCL_IB_GID_INDEX=3 (the table's RoCE v2
 * IPv4 entry, roceOptions()).
 *
 * The inline calls of verbs.h (ibv_post_send, ibv_post_recv, ibv_poll_cq) jump through the
 * context's ops table, which ibv_open_device fills here. Symbols are given with asm labels:
 * verbs.h declares some of these names as macros or with compatibility types.
 *
 * Invariants: one fake per process, made at the first call; fake_verbs_counters() reports
 * what happened (a test checks that its collectives really went through the fake, and through
 * dma-buf regions where it expects GPUDirect RDMA).
 *
 * NCCL counterpart: none.
 * Added in: stage 6.
 */
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "fake_verbs.h"

#if TCCL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

using tccl::fake::FakeVerbs;

#if TCCL_HAVE_CUDA
/// The "NIC" moving bytes from or into GPU memory.
void cudaCopy(void* dst, const void* src, size_t bytes) {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }();
  if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream) != cudaSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess) {
    abort();  // a fake NIC that cannot write must not pretend it did
  }
}
#endif

FakeVerbs& fake() {
  static FakeVerbs* f = [] {
    tccl::fake::Options o = tccl::fake::roceOptions();
    const char* dmabuf = getenv("FAKE_VERBS_DMABUF");
    o.dmabuf = dmabuf != nullptr && strcmp(dmabuf, "1") == 0;
#if TCCL_HAVE_CUDA
    o.copy = &cudaCopy;
#endif
    return new FakeVerbs(o);  // never freed: tccl's IB Net outlives main's statics
  }();
  return *f;
}

const tccl::IbvApi& api() { return fake().api(); }

}  // namespace

#define FAKE_EXPORT(name) __asm__(#name) __attribute__((visibility("default")))

extern "C" {
ibv_device** fakeGetDeviceList(int* n) FAKE_EXPORT(ibv_get_device_list);
void fakeFreeDeviceList(ibv_device** l) FAKE_EXPORT(ibv_free_device_list);
const char* fakeGetDeviceName(ibv_device* d) FAKE_EXPORT(ibv_get_device_name);
ibv_context* fakeOpenDevice(ibv_device* d) FAKE_EXPORT(ibv_open_device);
int fakeCloseDevice(ibv_context* c) FAKE_EXPORT(ibv_close_device);
int fakeQueryDevice(ibv_context* c, ibv_device_attr* a) FAKE_EXPORT(ibv_query_device);
int fakeQueryPort(ibv_context* c, uint8_t p, ibv_port_attr* a) FAKE_EXPORT(ibv_query_port);
int fakeQueryGid(ibv_context* c, uint8_t p, int i, ibv_gid* g) FAKE_EXPORT(ibv_query_gid);
ibv_pd* fakeAllocPd(ibv_context* c) FAKE_EXPORT(ibv_alloc_pd);
int fakeDeallocPd(ibv_pd* pd) FAKE_EXPORT(ibv_dealloc_pd);
ibv_mr* fakeRegMr(ibv_pd* pd, void* a, size_t n, int acc) FAKE_EXPORT(ibv_reg_mr);
ibv_mr* fakeRegDmabufMr(ibv_pd* pd, uint64_t off, size_t n, uint64_t iova, int fd, int acc)
    FAKE_EXPORT(ibv_reg_dmabuf_mr);
int fakeDeregMr(ibv_mr* mr) FAKE_EXPORT(ibv_dereg_mr);
ibv_cq* fakeCreateCq(ibv_context* c, int cqe, void* ctx, ibv_comp_channel* ch, int v)
    FAKE_EXPORT(ibv_create_cq);
int fakeDestroyCq(ibv_cq* cq) FAKE_EXPORT(ibv_destroy_cq);
ibv_qp* fakeCreateQp(ibv_pd* pd, ibv_qp_init_attr* a) FAKE_EXPORT(ibv_create_qp);
int fakeModifyQp(ibv_qp* qp, ibv_qp_attr* a, int mask) FAKE_EXPORT(ibv_modify_qp);
int fakeDestroyQp(ibv_qp* qp) FAKE_EXPORT(ibv_destroy_qp);
const char* fakeWcStatusStr(ibv_wc_status s) FAKE_EXPORT(ibv_wc_status_str);
/// Test hook: QPs created and dma-buf regions registered so far.
void fakeCounters(int* qps, int* dmabufMrs) FAKE_EXPORT(fake_verbs_counters);
}

ibv_device** fakeGetDeviceList(int* n) { return api().getDeviceList(n); }
void fakeFreeDeviceList(ibv_device** l) { api().freeDeviceList(l); }
const char* fakeGetDeviceName(ibv_device* d) { return api().getDeviceName(d); }
ibv_context* fakeOpenDevice(ibv_device* d) {
  ibv_context* c = api().openDevice(d);
  if (c != nullptr) {  // what verbs.h's inline calls jump through
    c->ops.post_send = api().postSend;
    c->ops.post_recv = api().postRecv;
    c->ops.poll_cq = api().pollCq;
  }
  return c;
}
int fakeCloseDevice(ibv_context* c) { return api().closeDevice(c); }
int fakeQueryDevice(ibv_context* c, ibv_device_attr* a) { return api().queryDevice(c, a); }
int fakeQueryPort(ibv_context* c, uint8_t p, ibv_port_attr* a) { return api().queryPort(c, p, a); }
int fakeQueryGid(ibv_context* c, uint8_t p, int i, ibv_gid* g) { return api().queryGid(c, p, i, g); }
ibv_pd* fakeAllocPd(ibv_context* c) { return api().allocPd(c); }
int fakeDeallocPd(ibv_pd* pd) { return api().deallocPd(pd); }
ibv_mr* fakeRegMr(ibv_pd* pd, void* a, size_t n, int acc) { return api().regMr(pd, a, n, acc); }
ibv_mr* fakeRegDmabufMr(ibv_pd* pd, uint64_t off, size_t n, uint64_t iova, int fd, int acc) {
  return api().regDmabufMr(pd, off, n, iova, fd, acc);
}
int fakeDeregMr(ibv_mr* mr) { return api().deregMr(mr); }
ibv_cq* fakeCreateCq(ibv_context* c, int cqe, void* ctx, ibv_comp_channel* ch, int v) {
  return api().createCq(c, cqe, ctx, ch, v);
}
int fakeDestroyCq(ibv_cq* cq) { return api().destroyCq(cq); }
ibv_qp* fakeCreateQp(ibv_pd* pd, ibv_qp_init_attr* a) { return api().createQp(pd, a); }
int fakeModifyQp(ibv_qp* qp, ibv_qp_attr* a, int mask) { return api().modifyQp(qp, a, mask); }
int fakeDestroyQp(ibv_qp* qp) { return api().destroyQp(qp); }
const char* fakeWcStatusStr(ibv_wc_status s) { return api().wcStatusStr(s); }
void fakeCounters(int* qps, int* dmabufMrs) {
  *qps = fake().qpsCreated();
  *dmabufMrs = fake().dmabufRegistrations();
}
