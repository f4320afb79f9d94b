/*
 * tests/net/fake_verbs.cc: the in-process verbs device. See fake_verbs.h.
 *
 * Added in: stage 6.
 */
#include "fake_verbs.h"

#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

namespace tccl {
namespace fake {

namespace {

struct Mr {
  ibv_mr mr;
  int access;
  bool dmabuf = false;  // registered by dma-buf: writes go through Options::copy
};
struct Cq {
  ibv_cq cq;
  std::deque<ibv_wc> wcs;
};
struct Qp {
  ibv_qp qp;
  QpRecord rec;
  std::deque<uint64_t> recvs;  // posted receives' wr_ids
  uint32_t destQpn = 0;
  ibv_gid dgid{};
  int sgidIndex = -1;
  bool global = false;
};

/// Everything the fake device holds; one at a time (fake_verbs.h says why).
struct State {
  Options opts;
  std::mutex mutex;
  ibv_device device{};
  ibv_device* list[2] = {&device, nullptr};
  std::map<ibv_context*, std::unique_ptr<ibv_context>> contexts;
  std::map<ibv_pd*, std::unique_ptr<ibv_pd>> pds;
  std::map<uint32_t, std::unique_ptr<Mr>> mrs;  // by key (lkey == rkey here)
  std::map<ibv_cq*, std::unique_ptr<Cq>> cqs;
  std::map<uint32_t, std::unique_ptr<Qp>> qps;  // by number
  std::vector<QpRecord> retired;                // destroyed QPs' records
  uint32_t nextKey = 0x100, nextQpn = 0x11;
  int qpsCreated = 0, dmabufMrs = 0;
};
State* g = nullptr;

Qp* qpOf(ibv_qp* qp) { return reinterpret_cast<Qp*>(qp); }  // qp is Qp's first member
Cq* cqOf(ibv_cq* cq) { return reinterpret_cast<Cq*>(cq); }

const char* stateName(int s) {
  static const char* const kNames[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  return s >= 0 && s < 7 ? kNames[s] : "?";
}

// ---- device, port, GIDs ------------------------------------------------------------------------

ibv_device** getDeviceList(int* n) {
  *n = 1;
  return g->list;
}
void freeDeviceList(ibv_device**) {}
const char* getDeviceName(ibv_device* d) { return d->name; }
ibv_context* openDevice(ibv_device* d) {
  std::lock_guard<std::mutex> lock(g->mutex);
  auto c = std::make_unique<ibv_context>();
  c->device = d;
  ibv_context* raw = c.get();
  g->contexts[raw] = std::move(c);
  return raw;
}
int closeDevice(ibv_context* c) {
  std::lock_guard<std::mutex> lock(g->mutex);
  return g->contexts.erase(c) ? 0 : EINVAL;
}
int queryDevice(ibv_context*, ibv_device_attr* a) {
  *a = ibv_device_attr{};
  a->phys_port_cnt = 1;
  a->max_qp_wr = 1024;
  return 0;
}
int queryPort(ibv_context*, uint8_t port, ibv_port_attr* a) {
  if (port != 1) return EINVAL;
  *a = ibv_port_attr{};
  a->state = g->opts.portState;
  a->active_mtu = g->opts.activeMtu;
  a->max_mtu = IBV_MTU_4096;
  a->lid = g->opts.lid;
  a->link_layer = g->opts.linkLayer;
  a->gid_tbl_len = int(g->opts.gids.size());
  return 0;
}
int queryGid(ibv_context*, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index < 0 || index >= int(g->opts.gids.size())) return EINVAL;
  *gid = g->opts.gids[size_t(index)].gid;
  return 0;
}
GidType queryGidType(ibv_context*, uint8_t port, int index) {
  if (port != 1 || index < 0 || index >= int(g->opts.gids.size())) return GidType::kUnknown;
  return g->opts.gids[size_t(index)].type;
}

// ---- PD, MR, CQ ---------------------------------------------------------------------------------

ibv_pd* allocPd(ibv_context* c) {
  std::lock_guard<std::mutex> lock(g->mutex);
  auto pd = std::make_unique<ibv_pd>();
  pd->context = c;
  ibv_pd* raw = pd.get();
  g->pds[raw] = std::move(pd);
  return raw;
}
int deallocPd(ibv_pd* pd) {
  std::lock_guard<std::mutex> lock(g->mutex);
  return g->pds.erase(pd) ? 0 : EINVAL;
}
ibv_mr* regMr(ibv_pd* pd, void* addr, size_t length, int access) {
  std::lock_guard<std::mutex> lock(g->mutex);
  auto m = std::make_unique<Mr>();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = m->mr.rkey = g->nextKey++;
  m->access = access;
  ibv_mr* raw = &m->mr;
  g->mrs[raw->lkey] = std::move(m);
  return raw;
}
ibv_mr* regDmabufMr(ibv_pd* pd, uint64_t, size_t length, uint64_t iova, int fd, int access) {
  std::lock_guard<std::mutex> lock(g->mutex);
  if (!g->opts.dmabuf) {
    errno = EOPNOTSUPP;  // as Soft-RoCE
    return nullptr;
  }
  if (fd < 0 || fcntl(fd, F_GETFD) == -1) {
    errno = EBADF;
    return nullptr;
  }
  auto m = std::make_unique<Mr>();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = reinterpret_cast<void*>(uintptr_t(iova));
  m->mr.length = length;
  m->mr.lkey = m->mr.rkey = g->nextKey++;
  m->access = access;
  m->dmabuf = true;
  ibv_mr* raw = &m->mr;
  g->mrs[raw->lkey] = std::move(m);
  g->dmabufMrs++;
  return raw;
}
int deregMr(ibv_mr* mr) {
  std::lock_guard<std::mutex> lock(g->mutex);
  return g->mrs.erase(mr->lkey) ? 0 : EINVAL;
}
ibv_cq* createCq(ibv_context* c, int cqe, void*, ibv_comp_channel*, int) {
  std::lock_guard<std::mutex> lock(g->mutex);
  auto q = std::make_unique<Cq>();
  q->cq.context = c;
  q->cq.cqe = cqe;
  ibv_cq* raw = &q->cq;
  g->cqs[raw] = std::move(q);
  return raw;
}
int destroyCq(ibv_cq* cq) {
  std::lock_guard<std::mutex> lock(g->mutex);
  return g->cqs.erase(cq) ? 0 : EINVAL;
}

// ---- QP and its state machine ----------------------------------------------------------------

ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  std::lock_guard<std::mutex> lock(g->mutex);
  if (attr->qp_type != IBV_QPT_RC || !attr->send_cq || !attr->recv_cq) {
    errno = EINVAL;
    return nullptr;
  }
  auto q = std::make_unique<Qp>();
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->qp.qp_num = g->nextQpn++;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_type = IBV_QPT_RC;
  q->rec.qpn = q->qp.qp_num;
  g->qpsCreated++;
  ibv_qp* raw = &q->qp;
  g->qps[raw->qp_num] = std::move(q);
  return raw;
}

int modifyQp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  std::lock_guard<std::mutex> lock(g->mutex);
  Qp* q = qpOf(qp);
  const int from = qp->state, to = a->qp_state;
  int need = -1;  // the mask verbs requires for this transition
  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
    need = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    need = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    need = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
           IBV_QP_MAX_QP_RD_ATOMIC;
  } else if (to == IBV_QPS_ERR || to == IBV_QPS_RESET) {
    need = IBV_QP_STATE;
  }
  if (need < 0 || mask != need) return EINVAL;
  if (to == IBV_QPS_INIT) {
    if (a->port_num != 1) return EINVAL;
    q->rec.accessFlags = a->qp_access_flags;
  }
  if (to == IBV_QPS_RTR) {
    if (a->path_mtu < IBV_MTU_256 || a->path_mtu > g->opts.activeMtu) return EINVAL;
    const bool roce = g->opts.linkLayer == IBV_LINK_LAYER_ETHERNET;
    if (roce && !a->ah_attr.is_global) return EINVAL;  // RoCE routes by GID only
    if (a->ah_attr.is_global && a->ah_attr.grh.sgid_index >= g->opts.gids.size()) return EINVAL;
    q->destQpn = a->dest_qp_num;
    q->global = a->ah_attr.is_global;
    q->dgid = a->ah_attr.grh.dgid;
    q->sgidIndex = a->ah_attr.is_global ? a->ah_attr.grh.sgid_index : -1;
    q->rec.sgidIndex = q->sgidIndex;
  }
  if (to == IBV_QPS_RTS) {
    q->rec.timeout = a->timeout;
    q->rec.retryCnt = a->retry_cnt;
  }
  q->rec.transitions.push_back(std::string(stateName(from)) + "->" + stateName(to));
  qp->state = ibv_qp_state(to);
  return 0;
}

int destroyQp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lock(g->mutex);
  auto it = g->qps.find(qp->qp_num);
  if (it == g->qps.end()) return EINVAL;
  g->retired.push_back(it->second->rec);
  g->qps.erase(it);
  return 0;
}

// ---- data path --------------------------------------------------------------------------------

int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard<std::mutex> lock(g->mutex);
  for (; wr != nullptr; wr = wr->next) {
    if (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_ERR) {
      *bad = wr;
      return EINVAL;
    }
    qpOf(qp)->recvs.push_back(wr->wr_id);
  }
  return 0;
}

/// True when [addr, addr + len) lies in a registered region with `access` (0: local use);
/// *dmabuf becomes true when that region was registered by dma-buf.
bool inRegion(uint32_t key, uint64_t addr, uint64_t len, int access, bool* dmabuf = nullptr) {
  auto it = g->mrs.find(key);
  if (it == g->mrs.end()) return false;
  const ibv_mr& mr = it->second->mr;
  const uint64_t base = reinterpret_cast<uintptr_t>(mr.addr);
  if (dmabuf != nullptr) *dmabuf = *dmabuf || it->second->dmabuf;
  return addr >= base && addr + len <= base + mr.length && (it->second->access & access) == access;
}

/// Is there a route from `src` to its destination GID on the fake fabric? The source GID's
/// type is the packet's (RoCE v1 or v2); it arrives where an entry holds the destination GID
/// with that same type (a table holds each address once per RoCE version).
bool routable(const Qp& src) {
  if (!src.global) return true;  // InfiniBand, by LID: one subnet
  if (src.sgidIndex < 0 || src.sgidIndex >= int(g->opts.gids.size())) return false;
  const GidType type = g->opts.gids[size_t(src.sgidIndex)].type;
  if (g->opts.v2Only && type != GidType::kRoceV2) return false;
  for (const GidEntry& e : g->opts.gids) {
    if (e.type == type && memcmp(&e.gid, &src.dgid, sizeof(ibv_gid)) == 0) return true;
  }
  return false;
}

void complete(ibv_cq* cq, uint64_t wrId, ibv_wc_status status, ibv_wc_opcode op, uint32_t qpn,
              uint32_t imm = 0, uint32_t len = 0) {
  ibv_wc wc{};
  wc.wr_id = wrId;
  wc.status = status;
  wc.opcode = op;
  wc.qp_num = qpn;
  wc.imm_data = imm;
  wc.byte_len = len;
  cqOf(cq)->wcs.push_back(wc);
}

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  std::lock_guard<std::mutex> lock(g->mutex);
  Qp* q = qpOf(qp);
  for (; wr != nullptr; wr = wr->next) {
    if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) {
      *bad = wr;
      return EINVAL;
    }
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
      *bad = wr;
      return EINVAL;  // the IB Net uses writes only
    }
    if (qp->state == IBV_QPS_ERR) {  // a QP in error flushes what is posted
      complete(qp->send_cq, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, qp->qp_num);
      continue;
    }
    uint64_t len = 0;
    for (int i = 0; i < wr->num_sge; i++) len += wr->sg_list[i].length;
    auto dest = g->qps.find(q->destQpn);
    const bool reaches = routable(*q) && dest != g->qps.end() &&
                         dest->second->destQpn == qp->qp_num &&
                         (dest->second->qp.state == IBV_QPS_RTR ||
                          dest->second->qp.state == IBV_QPS_RTS);
    if (!reaches) {
      // No acknowledgement ever comes: after retry_cnt timeouts, status 12; the QP errs.
      complete(qp->send_cq, wr->wr_id, IBV_WC_RETRY_EXC_ERR, IBV_WC_RDMA_WRITE, qp->qp_num);
      qp->state = IBV_QPS_ERR;
      continue;
    }
    Qp& d = *dest->second;
    bool device = false;  // a dma-buf region on either side: the copy hook moves the bytes
    bool ok = len == 0 || inRegion(wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len,
                                   IBV_ACCESS_REMOTE_WRITE, &device);
    for (int i = 0; ok && i < wr->num_sge; i++) {
      ok = inRegion(wr->sg_list[i].lkey, wr->sg_list[i].addr, wr->sg_list[i].length, 0, &device);
    }
    const bool imm = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (ok && imm && d.recvs.empty()) {
      complete(qp->send_cq, wr->wr_id, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_RDMA_WRITE, qp->qp_num);
      qp->state = IBV_QPS_ERR;
      continue;
    }
    if (!ok) {
      complete(qp->send_cq, wr->wr_id, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, qp->qp_num);
      qp->state = IBV_QPS_ERR;
      continue;
    }
    uint64_t at = wr->wr.rdma.remote_addr;
    for (int i = 0; i < wr->num_sge; i++) {
      void* to = reinterpret_cast<void*>(uintptr_t(at));
      const void* from = reinterpret_cast<const void*>(uintptr_t(wr->sg_list[i].addr));
      if (device && g->opts.copy != nullptr) {
        g->opts.copy(to, from, wr->sg_list[i].length);
      } else {
        memcpy(to, from, wr->sg_list[i].length);
      }
      at += wr->sg_list[i].length;
    }
    if (imm) {
      const uint64_t id = d.recvs.front();
      d.recvs.pop_front();
      complete(d.qp.recv_cq, id, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, d.qp.qp_num,
               wr->imm_data, uint32_t(len));
    }
    if (wr->send_flags & IBV_SEND_SIGNALED) {
      complete(qp->send_cq, wr->wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, qp->qp_num);
    }
  }
  return 0;
}

int pollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  std::lock_guard<std::mutex> lock(g->mutex);
  Cq* q = cqOf(cq);
  int got = 0;
  while (got < n && !q->wcs.empty()) {
    wc[got++] = q->wcs.front();
    q->wcs.pop_front();
  }
  return got;
}

const char* wcStatusStr(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    default: return "other error";
  }
}

}  // namespace

ibv_gid ipv4Gid(int a, int b, int c, int d) {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  g.raw[12] = uint8_t(a);
  g.raw[13] = uint8_t(b);
  g.raw[14] = uint8_t(c);
  g.raw[15] = uint8_t(d);
  return g;
}

ibv_gid linkLocalGid(int lowByte) {
  ibv_gid g{};
  g.raw[0] = 0xfe;
  g.raw[1] = 0x80;
  g.raw[15] = uint8_t(lowByte);
  return g;
}

Options roceOptions() {
  Options o;
  o.gids = {{linkLocalGid(1), GidType::kIbRoceV1},
            {linkLocalGid(1), GidType::kRoceV2},
            {ipv4Gid(10, 0, 0, 1), GidType::kIbRoceV1},
            {ipv4Gid(10, 0, 0, 1), GidType::kRoceV2}};
  return o;
}

FakeVerbs::FakeVerbs(Options o) : opts_(std::move(o)) {
  g = new State;
  g->opts = opts_;
  snprintf(g->device.name, sizeof(g->device.name), "%s", opts_.name.c_str());
  api_.getDeviceList = &getDeviceList;
  api_.freeDeviceList = &freeDeviceList;
  api_.getDeviceName = &getDeviceName;
  api_.openDevice = &openDevice;
  api_.closeDevice = &closeDevice;
  api_.queryDevice = &queryDevice;
  api_.queryPort = &queryPort;
  api_.queryGid = &queryGid;
  api_.queryGidType = &queryGidType;
  api_.allocPd = &allocPd;
  api_.deallocPd = &deallocPd;
  api_.regMr = &regMr;
  api_.regDmabufMr = &regDmabufMr;
  api_.deregMr = &deregMr;
  api_.createCq = &createCq;
  api_.destroyCq = &destroyCq;
  api_.createQp = &createQp;
  api_.modifyQp = &modifyQp;
  api_.destroyQp = &destroyQp;
  api_.postSend = &postSend;
  api_.postRecv = &postRecv;
  api_.pollCq = &pollCq;
  api_.wcStatusStr = &wcStatusStr;
}

FakeVerbs::~FakeVerbs() {
  delete g;
  g = nullptr;
}

std::vector<QpRecord> FakeVerbs::qps() const {
  std::lock_guard<std::mutex> lock(g->mutex);
  std::vector<QpRecord> all = g->retired;
  for (auto& [n, q] : g->qps) all.push_back(q->rec);
  return all;
}

int FakeVerbs::qpsCreated() const {
  std::lock_guard<std::mutex> lock(g->mutex);
  return g->qpsCreated;
}

int FakeVerbs::dmabufRegistrations() const {
  std::lock_guard<std::mutex> lock(g->mutex);
  return g->dmabufMrs;
}

int FakeVerbs::liveObjects() const {
  std::lock_guard<std::mutex> lock(g->mutex);
  return int(g->contexts.size() + g->pds.size() + g->mrs.size() + g->cqs.size() + g->qps.size());
}

}  // namespace fake
}  // namespace tccl
