/*
 * transport/net/ib/ib_device.cc: finding the HCA ports the IB Net uses, and their GIDs.
 *
 * What it is: the IB Net's start. At first use it asks verbs for every device, keeps the
 * ports that are ACTIVE and whose link layer is InfiniBand or Ethernet (RoCE), as TCCL_IB_HCA
 * selects them, opens a protection domain per device, and for RoCE picks the GID each
 * connection will route by. It logs one INIT line per port it keeps and says why when it keeps
 * none (no libibverbs, no device, TCCL_IB_DISABLE): the transport list then skips the IB Net,
 * and the network is sockets.
 *
 * Why the GID matters on RoCE: there is no LID; a packet is routed by its destination GID, and
 * a port's GID table holds one entry per (address, RoCE version) of its network interface. A
 * RoCE v2 GID holding the interface's IPv4 address is what routed Ethernet fabrics expect (v2
 * runs over UDP/IP); v1 is layer 2 only; an IPv6 link-local one does not leave the link. Two
 * sides that pick entries of different versions cannot talk, and the symptom is a completion
 * with status 12 (retry counter exceeded) after a timeout, never an error at connect.
 *
 * Invariants: devices are found once per process (the IbNet's once_flag); a port without a
 * usable GID (RoCE) is skipped with an INFO line; nothing here is a warning -- no RDMA is a
 * normal machine.
 *
 * NCCL counterpart: src/transport/net_ib.cc (ncclIbInitDevices, ncclIbGetGidIndex,
 * ncclIbMatchVfPath), src/misc/utils.cc (parseStringList / matchIfList for NCCL_IB_HCA).
 * Added in: stage 6.
 */
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "transport/net/ib/net_ib.h"

// InfiniBand / RoCE (stage 6), as NCCL_IB_*: which ports, which GID; 1 turns the IB Net off.
TCCL_PARAM(IbDisable, "IB_DISABLE", 0)
TCCL_PARAM(IbGidIndex, "IB_GID_INDEX", -1)

namespace tccl {

namespace {

/// The verbs half of the GPUDirect RDMA probe (NCCL's ncclIbDmaBufSupport): register nothing
/// from no descriptor. A library or device that can register a dma-buf fails for the bad
/// descriptor (EBADF, EINVAL); one that cannot says EOPNOTSUPP or EPROTONOSUPPORT.
bool probeDmabuf(const IbvApi& api, ibv_pd* pd) {
  errno = 0;
  ibv_mr* mr = api.regDmabufMr(pd, 0, 0, 0, -1, 0);
  if (mr != nullptr) {  // nothing registered successfully: support, evidently
    api.deregMr(mr);
    return true;
  }
  return errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
}

/// The port's data rate in Mbit/s: per-lane speed (enum ibv_port_attr::active_speed) times
/// lanes (active_width), as NCCL's ncclIbSpeed x ncclIbWidth. 0 for a code we do not know.
int portSpeedMbps(const ibv_port_attr& a) {
  int lane = 0;  // Mbit/s per lane
  switch (int(a.active_speed)) {  // (XDR's code, 256, is only in active_speed_ex)
    case 1: lane = 2500; break;     // SDR
    case 2: lane = 5000; break;     // DDR
    case 4: lane = 10000; break;    // QDR
    case 8: lane = 10000; break;    // FDR10
    case 16: lane = 14000; break;   // FDR
    case 32: lane = 25000; break;   // EDR
    case 64: lane = 50000; break;   // HDR
    case 128: lane = 100000; break; // NDR
    default: break;
  }
  int lanes = 0;
  switch (a.active_width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: break;
  }
  return lane * lanes;
}

}  // namespace

bool ibHcaSelected(const std::string& spec, const std::string& name, int port) {
  if (spec.empty()) return true;
  // >>> exercise 6.1: TCCL_IB_HCA picks the ports
  std::string list = spec;
  const bool exclude = list[0] == '^';
  if (exclude) list.erase(0, 1);
  const bool exact = !list.empty() && list[0] == '=';
  if (exact) list.erase(0, 1);
  bool listed = false;
  std::stringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    std::string dev = item;
    int wantPort = -1;  // any port
    const size_t colon = item.find(':');
    if (colon != std::string::npos) {
      dev = item.substr(0, colon);
      wantPort = atoi(item.c_str() + colon + 1);
    }
    // NCCL matches a prefix unless "=" asks for the exact name ("mlx5_1" also names mlx5_10).
    const bool nameOk = exact ? name == dev : name.compare(0, dev.size(), dev) == 0;
    if (nameOk && (wantPort < 0 || wantPort == port)) listed = true;
  }
  return exclude ? !listed : listed;
  // <<< exercise 6.1
}

namespace {

bool isZero(const ibv_gid& g) {
  static const ibv_gid kZero{};
  return memcmp(&g, &kZero, sizeof(g)) == 0;
}
/// ::ffff:a.b.c.d, the form a RoCE v2 GID of an IPv4 address takes.
bool isIpv4Mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; i++) {
    if (g.raw[i] != 0) return false;
  }
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}
bool isLinkLocal(const ibv_gid& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

std::string gidText(const ibv_gid& g) {
  char s[48];
  if (isIpv4Mapped(g)) {
    snprintf(s, sizeof(s), "::ffff:%u.%u.%u.%u", g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
  } else {
    snprintf(s, sizeof(s), "%02x%02x:%02x%02x:...:%02x%02x", g.raw[0], g.raw[1], g.raw[2],
             g.raw[3], g.raw[14], g.raw[15]);
  }
  return s;
}

const char* gidTypeName(GidType t) {
  switch (t) {
    case GidType::kRoceV2: return "RoCE v2";
    case GidType::kIbRoceV1: return "RoCE v1";
    default: return "type unknown";
  }
}

}  // namespace

int ibChooseGid(const IbvApi& api, ibv_context* context, uint8_t port, int tableLen,
                int64_t forced) {
  if (forced >= 0) return forced < tableLen ? int(forced) : -1;
  int best = -1, bestScore = 0;
  for (int i = 0; i < tableLen; i++) {
    ibv_gid g;
    if (api.queryGid(context, port, i, &g) != 0 || isZero(g)) continue;
    const GidType type = api.queryGidType(context, port, i);
    // RoCE v2 with an IPv4 address, then v2 with a routable IPv6 one, then v1.
    int score = 0;
    if (type == GidType::kRoceV2) score = isIpv4Mapped(g) ? 3 : (isLinkLocal(g) ? 0 : 2);
    if (type == GidType::kIbRoceV1) score = 1;
    if (score > bestScore) {
      best = i;
      bestScore = score;
    }
  }
  return best;
}

IbNet::IbNet(const IbvApi* api, std::string whyNoApi) : why_(std::move(whyNoApi)) {
  if (api != nullptr) {
    api_ = *api;
    haveApi_ = true;
  }
  loadLibrary_ = api == nullptr && why_.empty();
}

IbNet::~IbNet() {
  // Each device's ports share one PD and one context: free each once. (A communicator the
  // program never destroyed still holds QPs in that PD: ibv_dealloc_pd then fails with EBUSY,
  // harmlessly, at exit.)
  ibv_pd* lastPd = nullptr;
  for (IbDevice& d : devs_) {
    if (d.pd == lastPd) continue;
    lastPd = d.pd;
    api_.deallocPd(d.pd);
    api_.closeDevice(d.context);
  }
}

int IbNet::devices() const {
  std::call_once(once_, [this] { init(); });
  return int(devs_.size());
}

std::string IbNet::whyNone() const {
  devices();
  return why_;
}

void IbNet::init() const {
  if (loadLibrary_) {
    // At first use, not when the library loads: a program that never reaches the network
    // never opens libibverbs.
    std::string why;
    if (ibvLoad(&api_, &why) == tcclSuccess) {
      haveApi_ = true;
    } else {
      why_ = "libibverbs not loaded: " + why;
    }
  }
  if (!haveApi_) return;  // why_ says why
  if (tcclParamIbDisable() != 0) {
    why_ = "TCCL_IB_DISABLE=1";
    return;
  }
  int n = 0;
  ibv_device** list = api_.getDeviceList(&n);
  if (list == nullptr || n == 0) {
    why_ = "no RDMA device (ibv_get_device_list found none)";
    if (list) api_.freeDeviceList(list);
    return;
  }
  const std::string spec = getEnvString("TCCL_IB_HCA");
  for (int d = 0; d < n; d++) {
    const std::string name = api_.getDeviceName(list[d]);
    ibv_context* ctx = api_.openDevice(list[d]);
    if (ctx == nullptr) {
      TCCL_INFO(kNet | kInit, "NET/IB: cannot open %s: %s", name.c_str(), strerror(errno));
      continue;
    }
    ibv_device_attr attr{};
    ibv_pd* pd = nullptr;
    if (api_.queryDevice(ctx, &attr) == 0) {
      for (int p = 1; p <= attr.phys_port_cnt; p++) {
        if (!ibHcaSelected(spec, name, p)) continue;
        IbDevice dev;
        dev.name = name;
        dev.port = uint8_t(p);
        dev.context = ctx;
        if (api_.queryPort(ctx, dev.port, &dev.portAttr) != 0) continue;
        if (dev.portAttr.state != IBV_PORT_ACTIVE) {
          TCCL_INFO(kNet | kInit, "NET/IB: %s:%d is not active: skipped", name.c_str(), p);
          continue;
        }
        const uint8_t ll = dev.portAttr.link_layer;
        if (ll != IBV_LINK_LAYER_INFINIBAND && ll != IBV_LINK_LAYER_ETHERNET) continue;
        dev.roce = ll == IBV_LINK_LAYER_ETHERNET;
        dev.gidIndex = ibChooseGid(api_, ctx, dev.port, dev.portAttr.gid_tbl_len,
                                   dev.roce ? tcclParamIbGidIndex()
                                            : std::max<int64_t>(0, tcclParamIbGidIndex()));
        if (dev.gidIndex < 0 || api_.queryGid(ctx, dev.port, dev.gidIndex, &dev.gid) != 0) {
          TCCL_INFO(kNet | kInit, "NET/IB: %s:%d has no usable GID%s: skipped", name.c_str(), p,
                    tcclParamIbGidIndex() >= 0 ? " at TCCL_IB_GID_INDEX" : "");
          continue;
        }
        dev.gidType = api_.queryGidType(ctx, dev.port, dev.gidIndex);
        if (pd == nullptr) pd = api_.allocPd(ctx);
        if (pd == nullptr) {
          TCCL_INFO(kNet | kInit, "NET/IB: %s: ibv_alloc_pd failed: skipped", name.c_str());
          break;
        }
        dev.pd = pd;
        dev.dmabuf = probeDmabuf(api_, pd);
        dev.speedMbps = portSpeedMbps(dev.portAttr);
        TCCL_INFO(kNet | kInit, "NET/IB: using %s:%d (%s, GID index %d, %s %s, %d Mbit/s, "
                  "dma-buf %s)", name.c_str(), p, dev.roce ? "RoCE" : "InfiniBand",
                  dev.gidIndex, gidTypeName(dev.gidType), gidText(dev.gid).c_str(),
                  dev.speedMbps, dev.dmabuf ? "yes" : "no");
        devs_.push_back(dev);
      }
    }
    if (pd == nullptr) api_.closeDevice(ctx);  // no port of it kept
  }
  api_.freeDeviceList(list);
  if (devs_.empty()) {
    why_ = std::string("no active port ") + (spec.empty() ? "" : "selected by TCCL_IB_HCA ") +
           "with a usable GID";
  }
}

tcclResult_t IbNet::getProperties(int dev, NetProperties* props) const {
  TCCL_ARG_CHECK(dev >= 0 && dev < devices(), "NET/IB: no device %d", dev);
  const IbDevice& d = devs_[size_t(dev)];
  *props = NetProperties{};
  snprintf(props->name, sizeof(props->name), "%s:%u", d.name.c_str(), unsigned(d.port));
  props->speedMbps = d.speedMbps;
  props->anyHostMemory = false;  // only registered regions: the FIFO slots
  props->dmabuf = d.dmabuf;      // the verbs half of the GPUDirect RDMA probe
  return tcclSuccess;
}

}  // namespace tccl
