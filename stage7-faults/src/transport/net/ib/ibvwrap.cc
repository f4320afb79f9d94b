/*
 * transport/net/ib/ibvwrap.cc: libibverbs loaded with dlopen. See ibvwrap.h.
 *
 * Added in: stage 6.
 */
#include "transport/net/ib/ibvwrap.h"

#include <dlfcn.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

namespace tccl {

namespace {

// The inline calls of verbs.h: they jump through the provider's ops table (no symbol needed).
int postSendInline(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  return ibv_post_send(qp, wr, bad);
}
int postRecvInline(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return ibv_post_recv(qp, wr, bad);
}
int pollCqInline(ibv_cq* cq, int n, ibv_wc* wc) { return ibv_poll_cq(cq, n, wc); }

ibv_mr* noDmabuf(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  errno = EOPNOTSUPP;  // rdma-core before 34 has no ibv_reg_dmabuf_mr
  return nullptr;
}

/// The GID's type from sysfs (/sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/<i>):
/// "RoCE v2", or "IB/RoCE v1" (an IB port's GIDs say the same).
GidType gidTypeFromSysfs(ibv_context* context, uint8_t port, int index) {
  char path[256];
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%d",
           context->device->name, unsigned(port), index);  // (no library call: the struct's)
  std::ifstream f(path);
  std::string type;
  if (!std::getline(f, type)) return GidType::kUnknown;
  if (type.find("v2") != std::string::npos) return GidType::kRoceV2;
  return GidType::kIbRoceV1;
}

struct Loaded {
  IbvApi api{};
  tcclResult_t result = tcclSystemError;
  std::string why;
};

/// Fills `field` from symbol `name`; false (with why) when the library lacks it.
template <typename Fn>
bool take(void* lib, const char* name, Fn* field, std::string* why) {
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    *why = std::string("libibverbs.so.1 has no ") + name;
    return false;
  }
  *field = reinterpret_cast<Fn>(sym);
  return true;
}

Loaded load() {
  Loaded out;
  // RTLD_NOW: a missing symbol fails here, not in the middle of a connection.
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    out.why = err ? err : "libibverbs.so.1 not found";
    return out;
  }
  IbvApi& a = out.api;
  std::string& why = out.why;
  const bool ok =
      take(lib, "ibv_get_device_list", &a.getDeviceList, &why) &&
      take(lib, "ibv_free_device_list", &a.freeDeviceList, &why) &&
      take(lib, "ibv_get_device_name", &a.getDeviceName, &why) &&
      take(lib, "ibv_open_device", &a.openDevice, &why) &&
      take(lib, "ibv_close_device", &a.closeDevice, &why) &&
      take(lib, "ibv_query_device", &a.queryDevice, &why) &&
      take(lib, "ibv_query_port", &a.queryPort, &why) &&
      take(lib, "ibv_query_gid", &a.queryGid, &why) &&
      take(lib, "ibv_alloc_pd", &a.allocPd, &why) &&
      take(lib, "ibv_dealloc_pd", &a.deallocPd, &why) &&
      take(lib, "ibv_reg_mr", &a.regMr, &why) &&
      take(lib, "ibv_dereg_mr", &a.deregMr, &why) &&
      take(lib, "ibv_create_cq", &a.createCq, &why) &&
      take(lib, "ibv_destroy_cq", &a.destroyCq, &why) &&
      take(lib, "ibv_create_qp", &a.createQp, &why) &&
      take(lib, "ibv_modify_qp", &a.modifyQp, &why) &&
      take(lib, "ibv_destroy_qp", &a.destroyQp, &why) &&
      take(lib, "ibv_wc_status_str", &a.wcStatusStr, &why);
  if (!ok) return out;
  if (!take(lib, "ibv_reg_dmabuf_mr", &a.regDmabufMr, &why)) a.regDmabufMr = &noDmabuf;
  a.postSend = &postSendInline;
  a.postRecv = &postRecvInline;
  a.pollCq = &pollCqInline;
  a.queryGidType = &gidTypeFromSysfs;
  out.why.clear();
  out.result = tcclSuccess;
  return out;
}

}  // namespace

tcclResult_t ibvLoad(IbvApi* api, std::string* why) {
  static const Loaded loaded = load();  // once per process (thread-safe static init)
  *why = loaded.why;
  if (loaded.result == tcclSuccess) *api = loaded.api;
  return loaded.result;
}

std::string wcStatusText(const IbvApi& api, ibv_wc_status status) {
  const char* text = api.wcStatusStr ? api.wcStatusStr(status) : nullptr;
  return std::string(text ? text : "unknown status") + " (" + std::to_string(int(status)) + ")";
}

}  // namespace tccl
