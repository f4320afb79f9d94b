/*
 * comm.cc: creating and freeing a communicator, and the live-communicator registry.
 *
 * What it is: commCreate runs the init sequence --
 *
 *   1. bootstrap: join the other ranks through the unique id (common/bootstrap);
 *   2. all-gather PeerInfo (host, pid, GPU, library stage, FIFO size) and check it agrees;
 *   3. allocate the failure state a kernel can read (abort flag, status words).
 *
 * No connection is made here: connectors are created on first use at tcclGroupEnd, as in
 * NCCL, so a communicator costs nothing for peers it never talks to.
 *
 * Invariants: a communicator is registered only once fully built and unregistered before
 * anything is freed, so commCheck never accepts a half-made or half-freed one; freeing waits
 * for the last GPU launch first (kernels read the connectors' FIFOs), then lets the proxy
 * drain every send FIFO (an operation completes once its data is in the FIFO, not once it is
 * on the wire), then stops the proxy before freeing connectors (it is their only other user).
 *
 * NCCL counterpart: src/init.cc (ncclCommInitRankFunc, initTransportsRank, commFree).
 * Added in: stage 1.
 */
#include "comm.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "cuda_wrap.h"
#include "executor.h"
#include "fiber.h"
#include "proxy.h"
#include "transport/shm/peer_watch.h"
#include "trace.h"
#include "transport.h"
#include "tuning.h"

namespace {
std::mutex registryMutex;
std::unordered_set<const tcclComm*> registry;
}  // namespace

namespace tccl {

LaunchState::LaunchState() = default;
LaunchState::~LaunchState() = default;

tcclResult_t LaunchState::ensureProxy(CommContext& ctx) {
  if (proxy) return tcclSuccess;
  proxy = std::make_unique<Proxy>(&ctx);
  return proxy->start();
}


bool commIsLive(const tcclComm* comm) {
  std::lock_guard<std::mutex> lock(registryMutex);
  return registry.count(comm) != 0;
}

tcclResult_t commCheck(const tcclComm* comm, const char* call) {
  TCCL_ARG_CHECK(comm != nullptr, "%s: communicator is NULL", call);
  TCCL_ARG_CHECK(commIsLive(comm), "%s: communicator %p is not valid (destroyed, or never created)",
                 call, (const void*)comm);
  return tcclSuccess;
}

CommContext& commContext(tcclComm* comm) { return *comm; }

/// Waits until the proxy has put every published step on the wire (head == tail on each send
/// connector), the communicator fails, or TCCL_BOOTSTRAP_TIMEOUT passes.
static void drainSendFifos(tcclComm* comm) {
  Deadline deadline = deadlineIn(bootstrapTimeoutSeconds());
  for (auto& [key, c] : comm->connectors) {
    if (!c->isSend || !c->connected || !c->transportComm->needsProxy()) continue;
    ConnFifo* fifo = c->conn->fifo;
    while (loadAcquire(&fifo->head) < loadAcquire(&fifo->tail)) {
      if (comm->asyncError.load() != tcclSuccess ||
          __atomic_load_n(comm->abortFlag, __ATOMIC_ACQUIRE)) {
        return;
      }
      if (Clock::now() > deadline) {
        TCCL_WARN("destroy: data for rank %d never left (the peer stopped reading)", c->peer);
        return;
      }
      comm->launch.proxy->kick();
      uint32_t seen = comm->progress.seq();
      if (loadAcquire(&fifo->head) < loadAcquire(&fifo->tail)) comm->progress.wait(seen, 1000);
    }
  }
}

static tcclResult_t checkPeers(tcclComm* comm) {
  const PeerInfo& me = comm->peers[comm->rank];
  for (const PeerInfo& p : comm->peers) {
    if (p.stage != me.stage) {
      TCCL_WARN("rank %d runs the stage-%d library, rank %d stage %d: every rank must run the "
                "same chapter", comm->rank, me.stage, p.rank, p.stage);
      return tcclInvalidUsage;
    }
    if (p.buffSize != me.buffSize) {
      TCCL_WARN("TCCL_BUFFSIZE differs: %lu on rank %d, %lu on rank %d (it must be the same "
                "everywhere)", (unsigned long)me.buffSize, comm->rank, (unsigned long)p.buffSize,
                p.rank);
      return tcclInvalidUsage;
    }
    // Stage 5: both ends of a send/recv choose its protocol from its size and this knob.
    if (p.p2pLLThreshold != me.p2pLLThreshold) {
      TCCL_WARN("TCCL_P2P_LL_THRESHOLD differs: %lld on rank %d, %lld on rank %d (it must be "
                "the same everywhere)", (long long)me.p2pLLThreshold, comm->rank,
                (long long)p.p2pLLThreshold, p.rank);
      return tcclInvalidUsage;
    }
    // Stage 5: both ends cut a large send/recv into parts with this knob.
    if (p.p2pMaxChannels != me.p2pMaxChannels) {
      TCCL_WARN("TCCL_MAX_P2P_NCHANNELS differs: %lld on rank %d, %lld on rank %d (it must be "
                "the same everywhere)", (long long)me.p2pMaxChannels, comm->rank,
                (long long)p.p2pMaxChannels, p.rank);
      return tcclInvalidUsage;
    }
  }
  return tcclSuccess;
}

static tcclResult_t commInit(tcclComm* comm, const void* id) {
  // Stage 3: TCCL_ALGO is checked before anything is set up (a typo is an error, not a
  // silent fallback to the default choice).
  TCCL_CHECK(tuningInit(comm));
  // A FIFO step must hold at least one 16-byte pack of any element type and keep slots
  // 16-byte aligned; a smaller step would make the primitives' step loop spin forever.
  const int64_t buffSize = tcclParamBuffSize();
  if (buffSize < 128 * kNSteps || buffSize % (16 * kNSteps) != 0) {
    TCCL_WARN("TCCL_BUFFSIZE=%ld is invalid: it must be at least %d and a multiple of %d",
              (long)buffSize, 128 * kNSteps, 16 * kNSteps);
    return tcclInvalidArgument;
  }
  TCCL_CHECK(Bootstrap::create(id, comm->rank, comm->nranks, &comm->bootstrap));
  // Step 2: everyone learns about everyone.
  comm->peers.resize(comm->nranks);
  PeerInfo& me = comm->peers[comm->rank];
  memset(&me, 0, sizeof(me));
  me.rank = comm->rank;
  me.pid = getpid();
  me.hostHash = getHostHash();
  me.cudaDev = comm->cudaDev;
  me.stage = TCCL_STAGE;
  me.buffSize = uint64_t(tcclParamBuffSize());
  me.trace = traceEnabled() ? 1 : 0;
  me.p2pLLThreshold = tcclParamP2pLLThreshold();
  me.p2pMaxChannels = tcclParamMaxP2pNChannels();
  me.nets = usableNets();  // stage 6: sockets always; verbs where a device is (transport.cc)
  cudaBusId(comm->cudaDev, me.busId, sizeof(me.busId));
  TCCL_CHECK(comm->bootstrap->allGather(comm->peers.data(), sizeof(PeerInfo)));
  TCCL_CHECK(checkPeers(comm));
  // Stage 5: the most ranks on any one GPU (from the all-gathered bus ids, so every rank
  // agrees). Device work shares that GPU's blocks among them (plan_ring.cc, plan_p2p.cc).
  for (const PeerInfo& p : comm->peers) {
    int same = 0;
    for (const PeerInfo& q : comm->peers) {
      same += q.hostHash == p.hostHash && strcmp(q.busId, p.busId) == 0 ? 1 : 0;
    }
    comm->ranksPerGpu = std::max(comm->ranksPerGpu, same);
  }
  // Stage 3: more ranks on this host than it has cores, and host waiters yield at once
  // (host_backend.h, spinPolls). (The host's cores, not this process's affinity: a rank bound
  // to one core is not oversubscribed for that.)
  int local = 0;
  for (const PeerInfo& p : comm->peers) local += p.hostHash == me.hostHash ? 1 : 0;
  comm->oversubscribed = local > int(sysconf(_SC_NPROCESSORS_ONLN));
  // Stage 5: whether this rank's kernels reach every peer over a transport with LL slots;
  // the communicator has LL only where every rank's kernels do (tuningCheckPeers).
  bool llReach = true, ll128Reach = true;
  for (int r = 0; r < comm->nranks; r++) {
    if (r != comm->rank && !kernelsHaveLL(*comm, r)) llReach = false;
    if (r != comm->rank && !kernelsHaveLL128(*comm, r)) ll128Reach = false;
  }
  TCCL_CHECK(tuningCheckPeers(comm, llReach, ll128Reach ? computeCapability(comm->cudaDev) : 0));  // stage 3: every rank chooses algorithms alike
  // Step 3: failure state, in memory a kernel can read when we have a GPU.
  const bool mapped = comm->cudaDev >= 0;
  void* flag = nullptr;
  TCCL_CHECK(hostCalloc(&flag, 4096, mapped));
  comm->abortFlag = static_cast<volatile uint32_t*>(flag);
  comm->devStatus = reinterpret_cast<uint32_t*>(static_cast<char*>(flag) + 64);
  static_assert(64 + kMaxWorkItems * sizeof(uint32_t) <= 4096, "status words must fit");
  if (mapped) TCCL_CHECK(eventCreate(&comm->launch.lastLaunch));
  TCCL_CHECK(traceCommInit(comm));
  TCCL_INFO(kInit, "comm %p rank %d nranks %d cudaDev %d busId %s%s%s", (void*)comm, comm->rank,
            comm->nranks, comm->cudaDev, me.busId, comm->name.empty() ? "" : " name ",
            comm->name.c_str());
  return tcclSuccess;
}

tcclResult_t commCreate(const void* id, int nranks, int rank, const tcclConfig_t* config,
                        tcclComm** out) {
  auto* comm = new tcclComm;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->cudaDev = currentCudaDevice();
  if (config && config->commName) comm->name = config->commName;
  if (config && config->minCTAs != TCCL_CONFIG_UNDEF_INT) comm->minChannels = config->minCTAs;
  if (config && config->maxCTAs != TCCL_CONFIG_UNDEF_INT) comm->maxChannels = config->maxCTAs;
  setLogRank(rank);
  tcclResult_t res = commInit(comm, id);
  if (res != tcclSuccess) {
    commFree(comm, true);
    return res;
  }
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    registry.insert(comm);
  }
  *out = comm;
  return tcclSuccess;
}

tcclResult_t commFree(tcclComm* comm, bool abort) {
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    registry.erase(comm);
  }
  // Running kernels and workers bail out.
  if (abort && comm->abortFlag) __atomic_store_n(comm->abortFlag, 1u, __ATOMIC_RELEASE);
  // Kernels read the FIFOs and flags: they must be done before anything is freed.
  if (comm->launch.haveLaunched) eventSynchronize(comm->launch.lastLaunch);
  if (comm->launch.proxy && !abort) drainSendFifos(comm);
  if (comm->launch.proxy) comm->launch.proxy->stop();
  comm->launch.workers.reset();
  comm->launch.fibers.clear();
  for (auto& [key, c] : comm->connectors) {
    if (c->transportComm) c->transportComm->free(*c);
  }
  comm->connectors.map.clear();
  comm->peerWatch.reset();  // it points into the FIFOs just freed
  comm->bootstrap.reset();
  traceCommDestroy(comm);
  eventDestroy(comm->launch.lastLaunch);
  hostFree(const_cast<uint32_t*>(comm->abortFlag), comm->cudaDev >= 0);
  comm->magic = 0;
  delete comm;
  return tcclSuccess;
}

}  // namespace tccl
