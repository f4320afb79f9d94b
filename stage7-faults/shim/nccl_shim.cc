/*
 * nccl_shim.cc: libnccl.so.2 -- every function of nccl.h (NCCL 2.19), forwarded to tccl.
 *
 * What it is: the library half of the nccl.h shim. Each pnccl* function converts its
 * arguments to tccl's types and calls the tccl function of the same name; each nccl* function
 * is a weak alias of its pnccl* twin, as in NCCL (a profiler may define ncclAllReduce and call
 * pncclAllReduce). Three things are more than a rename:
 *
 *  1. Configs are converted field by field (ncclConfig_t -> tcclConfig_t): the layouts differ
 *     and a program built against an older or newer nccl.h passes its own layout.
 *  2. ncclCommInitRank(Config) inside a group is deferred to the outermost ncclGroupEnd, as
 *     NCCL does since 2.14. A process that drives several GPUs (nccl-tests -g 2) creates all
 *     its ranks in one group from one thread; tcclCommInitRank blocks until every rank has
 *     joined, so called in place the first rank would wait for the second forever. At
 *     ncclGroupEnd the deferred ranks are created together, one thread each, each thread on
 *     the CUDA device that was current when its ncclCommInitRank was called.
 *  3. Calls tccl cannot do (ncclCommSplit, ncclCommFinalize) fail with ncclInvalidUsage and a
 *     message saying so; none of them pretends to work.
 *  4. NCCL's environment knobs that tccl also has are honoured (stage 3: NCCL_ALGO; stage 5:
 *     NCCL_PROTO, NCCL_P2P_LL_THRESHOLD): when the library is loaded, NCCL_X is copied to
 *     TCCL_X unless TCCL_X is set, so a job script written for NCCL steers tccl the same way.
 *
 * Invariants: the values of every enum equal tccl's (static_asserts below), and an
 * ncclComm_t is a tcclComm_t under another name (the shim never defines struct ncclComm).
 * The shim keeps one piece of state per thread: its group depth and the deferred inits.
 * ncclGetLastError reports the layer that refused the last failing call: the shim's message
 * when the shim refused it, tcclGetLastError otherwise.
 *
 * NCCL counterpart: src/init.cc, src/collectives.cc, src/enqueue.cc, src/group.cc (the
 * NCCL_API entry points), and ncclAsyncJob (group.cc) for the deferred inits.
 * Added in: stage 2.
 */
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tccl.h"
#include "tccl/common/debug.h"

#if TCCL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

// ---- NCCL's knobs -----------------------------------------------------------------------------
namespace {
// NCCL names of the knobs tccl has under TCCL_ names (grows with the chapters).
const char* const kNcclKnobs[] = {"ALGO", "PROTO", "P2P_LL_THRESHOLD"};  // stage 5: the last two

// Runs when libnccl.so.2 is loaded, before any call could read a knob.
__attribute__((constructor)) void honourNcclKnobs() {
  for (const char* knob : kNcclKnobs) {
    const std::string nccl = std::string("NCCL_") + knob, tccl = std::string("TCCL_") + knob;
    const char* value = getenv(nccl.c_str());
    if (value != nullptr && getenv(tccl.c_str()) == nullptr) setenv(tccl.c_str(), value, 0);
  }
}
}  // namespace

// ---- Values are equal by design --------------------------------------------------------------
static_assert(sizeof(ncclUniqueId) == sizeof(tcclUniqueId), "unique id size");
static_assert(int(ncclSuccess) == int(tcclSuccess) && int(ncclInProgress) == int(tcclInProgress) &&
                  int(ncclInvalidUsage) == int(tcclInvalidUsage) &&
                  int(ncclRemoteError) == int(tcclRemoteError) &&
                  int(ncclNumResults) == int(tcclNumResults),
              "ncclResult_t values");
static_assert(int(ncclInt8) == int(tcclInt8) && int(ncclUint64) == int(tcclUint64) &&
                  int(ncclFloat16) == int(tcclFloat16) && int(ncclFloat64) == int(tcclFloat64) &&
                  int(ncclBfloat16) == int(tcclBfloat16) && int(ncclNumTypes) == int(tcclNumTypes),
              "ncclDataType_t values");
static_assert(int(ncclSum) == int(tcclSum) && int(ncclProd) == int(tcclProd) &&
                  int(ncclMax) == int(tcclMax) && int(ncclMin) == int(tcclMin) &&
                  int(ncclAvg) == int(tcclAvg) && int(ncclNumOps) == int(tcclNumOps),
              "ncclRedOp_t values");
static_assert(int(ncclScalarDevice) == int(tcclScalarDevice) &&
                  int(ncclScalarHostImmediate) == int(tcclScalarHostImmediate),
              "ncclScalarResidence_t values");

namespace {

constexpr unsigned int kNcclConfigMagic = 0xcafebeef;

tcclComm_t toTccl(ncclComm_t c) { return reinterpret_cast<tcclComm_t>(c); }
ncclComm_t toNccl(tcclComm_t c) { return reinterpret_cast<ncclComm_t>(c); }
tcclDataType_t toTccl(ncclDataType_t t) { return static_cast<tcclDataType_t>(t); }
tcclRedOp_t toTccl(ncclRedOp_t op) { return static_cast<tcclRedOp_t>(op); }
tcclUniqueId toTccl(const ncclUniqueId& id) {
  tcclUniqueId out;
  memcpy(out.internal, id.internal, sizeof(out.internal));
  return out;
}

// ---- Errors ----------------------------------------------------------------------------------
// Which layer refused this thread's last failing call (see ncclGetLastError).
thread_local bool shimFailedLast = false;

/// A result from tccl: passed through; a failure makes tccl's message the one to report.
ncclResult_t fromTccl(tcclResult_t r) {
  if (r != tcclSuccess) shimFailedLast = false;
  return static_cast<ncclResult_t>(r);
}

/// The shim refuses a call: logs why (as a TCCL WARN) and makes that the message to report.
#define SHIM_FAIL(result, ...) \
  do {                         \
    TCCL_WARN(__VA_ARGS__);    \
    shimFailedLast = true;     \
    return (result);           \
  } while (0)

// ---- Configs ---------------------------------------------------------------------------------
/// ncclConfig_t -> tcclConfig_t, field by field. NCCL_CONFIG_UNDEF_INT and
/// TCCL_CONFIG_UNDEF_INT are both INT_MIN, but the mapping is spelled out so it stays right
/// if either changes.
ncclResult_t convertConfig(const ncclConfig_t* in, tcclConfig_t* out) {
  tcclConfig_t c = TCCL_CONFIG_INITIALIZER;
  *out = c;
  if (in == nullptr) return ncclSuccess;
  if (in->magic != kNcclConfigMagic) {
    SHIM_FAIL(ncclInvalidArgument,
              "ncclCommInitRankConfig: config was not initialised with NCCL_CONFIG_INITIALIZER "
              "(magic 0x%x)",
              in->magic);
  }
  // Every layout since NCCL 2.14 begins with the fields read here; a larger size (a newer
  // nccl.h) only adds fields after them.
  if (in->size < offsetof(ncclConfig_t, maxCTAs) + sizeof(int)) {
    SHIM_FAIL(ncclInvalidArgument, "ncclCommInitRankConfig: config size %zu is too small",
              in->size);
  }
  auto field = [](int v) { return v == NCCL_CONFIG_UNDEF_INT ? TCCL_CONFIG_UNDEF_INT : v; };
  out->blocking = field(in->blocking);
  out->minCTAs = field(in->minCTAs);
  out->maxCTAs = field(in->maxCTAs);
  if (in->cgaClusterSize != NCCL_CONFIG_UNDEF_INT) {
    TCCL_INFO(tccl::kInit, "ncclConfig_t.cgaClusterSize=%d is ignored by tccl", in->cgaClusterSize);
  }
  if (in->size >= offsetof(ncclConfig_t, netName) + sizeof(const char*) &&
      in->netName != NCCL_CONFIG_UNDEF_PTR) {
    TCCL_INFO(tccl::kInit, "ncclConfig_t.netName=%s is ignored by tccl", in->netName);
  }
  return ncclSuccess;
}

// ---- Groups and deferred communicator creation -----------------------------------------------
/// One ncclCommInitRank(Config) called inside a group, waiting for ncclGroupEnd.
struct DeferredInit {
  ncclComm_t* comm;
  int nranks;
  tcclUniqueId id;
  int rank;
  bool hasConfig;
  tcclConfig_t config;
  int cudaDev;  // current when ncclCommInitRank was called; -1 without a GPU
};

struct ShimGroup {
  int depth = 0;  // mirrors tccl's depth for this thread
  std::vector<DeferredInit> inits;
};
thread_local ShimGroup shimGroup;

int currentDevice() {
#if TCCL_HAVE_CUDA
  int n = 0, dev = -1;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0 || cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();  // no driver or no GPU: a host-only rank, and no sticky error left
    return -1;
  }
  return dev;
#else
  return -1;
#endif
}

tcclResult_t setDevice(int dev) {
#if TCCL_HAVE_CUDA
  if (dev >= 0 && cudaSetDevice(dev) != cudaSuccess) {
    TCCL_WARN("ncclGroupEnd: cudaSetDevice(%d) failed: %s", dev,
              cudaGetErrorString(cudaGetLastError()));
    return tcclUnhandledCudaError;
  }
#endif
  return tcclSuccess;
}

/// Creates ranks in place or, inside a group, queues them for ncclGroupEnd.
ncclResult_t initRank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank,
                      ncclConfig_t* config) {
  tcclConfig_t tconfig;
  ncclResult_t res = convertConfig(config, &tconfig);
  if (res != ncclSuccess) return res;
  tcclConfig_t* tc = config ? &tconfig : nullptr;
  if (shimGroup.depth == 0) {
    tcclComm_t tcomm = nullptr;
    // A NULL comm goes through, so tccl's argument check reports it.
    res = fromTccl(tcclCommInitRankConfig(comm ? &tcomm : nullptr, nranks, toTccl(id), rank, tc));
    if (comm) *comm = toNccl(tcomm);
    return res;
  }
  if (comm == nullptr) SHIM_FAIL(ncclInvalidArgument, "ncclCommInitRank: comm pointer is NULL");
  *comm = nullptr;  // the handle exists once ncclGroupEnd has created it
  shimGroup.inits.push_back(
      DeferredInit{comm, nranks, toTccl(id), rank, config != nullptr, tconfig, currentDevice()});
  return ncclSuccess;
}

/// Creates every deferred rank of this thread's group, one thread each: a rank's init
/// returns only once all ranks of its communicator have joined, and several of them may be
/// in this process. On a failure every rank made here is aborted and its handle cleared.
ncclResult_t runDeferredInits(std::vector<DeferredInit>& inits) {
  if (inits.empty()) return ncclSuccess;
  std::vector<tcclComm_t> comms(inits.size(), nullptr);
  std::vector<tcclResult_t> results(inits.size(), tcclSuccess);
  std::vector<std::string> why(inits.size());  // tccl's message lives in the worker's thread
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); i++) {
    threads.emplace_back([&, i] {
      const DeferredInit& d = inits[i];
      results[i] = setDevice(d.cudaDev);
      if (results[i] == tcclSuccess) {
        results[i] =
            tcclCommInitRankConfig(&comms[i], d.nranks, d.id, d.rank,
                                   d.hasConfig ? const_cast<tcclConfig_t*>(&d.config) : nullptr);
      }
      if (results[i] != tcclSuccess) why[i] = tcclGetLastError(nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < inits.size(); i++) {
    if (results[i] == tcclSuccess) continue;
    for (size_t j = 0; j < inits.size(); j++) {
      if (comms[j]) tcclCommAbort(comms[j]);
      *inits[j].comm = nullptr;
    }
    SHIM_FAIL(static_cast<ncclResult_t>(results[i]),
              "ncclGroupEnd: ncclCommInitRank of rank %d (of %d) deferred to this group end "
              "failed: %s",
              inits[i].rank, inits[i].nranks, why[i].c_str());
  }
  for (size_t i = 0; i < inits.size(); i++) *inits[i].comm = toNccl(comms[i]);
  return ncclSuccess;
}

}  // namespace

// ---- The API: pnccl* implementations --------------------------------------------------------
extern "C" {

ncclResult_t pncclGetVersion(int* version) {
  if (version == nullptr) SHIM_FAIL(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  // The version of NCCL's API the shim implements, which is what callers compare against.
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* pncclGetErrorString(ncclResult_t result) {
  return tcclGetErrorString(static_cast<tcclResult_t>(result));
}

const char* pncclGetLastError(ncclComm_t comm) {
  return shimFailedLast ? tccl::lastError() : tcclGetLastError(toTccl(comm));
}

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  tcclResult_t err = tcclSuccess;
  ncclResult_t res = fromTccl(tcclCommGetAsyncError(toTccl(comm), &err));
  if (res == ncclSuccess && asyncError) *asyncError = static_cast<ncclResult_t>(err);
  return res;
}

ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  tcclUniqueId id;
  ncclResult_t res = fromTccl(tcclGetUniqueId(uniqueId ? &id : nullptr));
  if (res == ncclSuccess) memcpy(uniqueId->internal, id.internal, sizeof(id.internal));
  return res;
}

ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return initRank(comm, nranks, commId, rank, nullptr);
}

ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config) {
  return initRank(comm, nranks, commId, rank, config);
}

ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  // ncclComm_t and tcclComm_t are both one pointer: the array is passed as it is.
  static_assert(sizeof(ncclComm_t) == sizeof(tcclComm_t), "handle size");
  return fromTccl(tcclCommInitAll(reinterpret_cast<tcclComm_t*>(comm), ndev, devlist));
}

ncclResult_t pncclCommFinalize(ncclComm_t) {
  SHIM_FAIL(ncclInvalidUsage,
            "ncclCommFinalize is not implemented in tccl stage 2; call ncclCommDestroy, which "
            "waits for outstanding operations itself");
}

ncclResult_t pncclCommDestroy(ncclComm_t comm) { return fromTccl(tcclCommDestroy(toTccl(comm))); }

ncclResult_t pncclCommAbort(ncclComm_t comm) { return fromTccl(tcclCommAbort(toTccl(comm))); }

ncclResult_t pncclCommSplit(ncclComm_t, int, int, ncclComm_t* newcomm, ncclConfig_t*) {
  if (newcomm) *newcomm = nullptr;
  SHIM_FAIL(ncclInvalidUsage, "ncclCommSplit is not implemented in tccl stage 2");
}

// ---- NCCL 2.19: memory and registration ------------------------------------------------------
ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) SHIM_FAIL(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
#if TCCL_HAVE_CUDA
  // NCCL allocates cuMem memory fit for registration; tccl registers nothing before stage 5,
  // so plain device memory on the current device is the same thing to every caller.
  cudaError_t e = cudaMalloc(ptr, size);
  if (e != cudaSuccess) SHIM_FAIL(ncclUnhandledCudaError, "ncclMemAlloc: %s", cudaGetErrorString(e));
  return ncclSuccess;
#else
  (void)size;
  *ptr = nullptr;
  SHIM_FAIL(ncclInvalidUsage, "ncclMemAlloc: this tccl was built without CUDA");
#endif
}

ncclResult_t pncclMemFree(void* ptr) {
#if TCCL_HAVE_CUDA
  cudaError_t e = cudaFree(ptr);
  if (e != cudaSuccess) SHIM_FAIL(ncclUnhandledCudaError, "ncclMemFree: %s", cudaGetErrorString(e));
  return ncclSuccess;
#else
  (void)ptr;
  SHIM_FAIL(ncclInvalidUsage, "ncclMemFree: this tccl was built without CUDA");
#endif
}

ncclResult_t pncclCommRegister(const ncclComm_t, void*, size_t, void** handle) {
  if (handle) *handle = nullptr;
  SHIM_FAIL(ncclInvalidUsage, "ncclCommRegister: buffer registration arrives in tccl stage 5");
}

ncclResult_t pncclCommDeregister(const ncclComm_t, void*) {
  SHIM_FAIL(ncclInvalidUsage, "ncclCommDeregister: buffer registration arrives in tccl stage 5");
}

ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  return fromTccl(tcclCommCount(toTccl(comm), count));
}

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  return fromTccl(tcclCommCuDevice(toTccl(comm), device));
}

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  return fromTccl(tcclCommUserRank(toTccl(comm), rank));
}

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm) {
  tcclRedOp_t top = tcclSum;
  ncclResult_t res = fromTccl(
      tcclRedOpCreatePreMulSum(op ? &top : nullptr, scalar, toTccl(datatype),
                               static_cast<tcclScalarResidence_t>(residence), toTccl(comm)));
  if (res == ncclSuccess) *op = static_cast<ncclRedOp_t>(top);
  return res;
}

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return fromTccl(tcclRedOpDestroy(toTccl(op), toTccl(comm)));
}

ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream) {
  return fromTccl(tcclReduce(sendbuff, recvbuff, count, toTccl(datatype), toTccl(op), root,
                             toTccl(comm), stream));
}

ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return fromTccl(tcclBroadcast(buff, buff, count, toTccl(datatype), root, toTccl(comm), stream));
}

ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream) {
  return fromTccl(
      tcclBroadcast(sendbuff, recvbuff, count, toTccl(datatype), root, toTccl(comm), stream));
}

ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream) {
  return fromTccl(
      tcclAllReduce(sendbuff, recvbuff, count, toTccl(datatype), toTccl(op), toTccl(comm), stream));
}

ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream) {
  return fromTccl(tcclReduceScatter(sendbuff, recvbuff, recvcount, toTccl(datatype), toTccl(op),
                                    toTccl(comm), stream));
}

ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return fromTccl(
      tcclAllGather(sendbuff, recvbuff, sendcount, toTccl(datatype), toTccl(comm), stream));
}

ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream) {
  return fromTccl(tcclSend(sendbuff, count, toTccl(datatype), peer, toTccl(comm), stream));
}

ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream) {
  return fromTccl(tcclRecv(recvbuff, count, toTccl(datatype), peer, toTccl(comm), stream));
}

ncclResult_t pncclGroupStart(void) {
  ncclResult_t res = fromTccl(tcclGroupStart());
  if (res == ncclSuccess) shimGroup.depth++;
  return res;
}

ncclResult_t pncclGroupEnd(void) {
  // Unbalanced: tccl reports the misuse.
  if (shimGroup.depth == 0) return fromTccl(tcclGroupEnd());
  if (--shimGroup.depth > 0) return fromTccl(tcclGroupEnd());
  // The outermost end: create the deferred communicators first (nothing else in the group can
  // use them: their handles were NULL until now), then launch what tccl has queued.
  std::vector<DeferredInit> inits;
  inits.swap(shimGroup.inits);
  ncclResult_t initRes = runDeferredInits(inits);
  ncclResult_t endRes = fromTccl(tcclGroupEnd());
  if (initRes != ncclSuccess) {
    shimFailedLast = true;  // the init failure is the one to report
    return initRes;
  }
  return endRes;
}

}  // extern "C"

// ---- The API: nccl* names, weak aliases of the pnccl* implementations ------------------------
// As NCCL's NCCL_API: a profiling library linked before libnccl may define ncclX itself and
// call pncclX; everyone else reaches pncclX through ncclX.
#define NCCL_SHIM_ALIAS(name) \
  extern "C" decltype(p##name) name __attribute__((weak, alias("p" #name)));

NCCL_SHIM_ALIAS(ncclGetVersion)
NCCL_SHIM_ALIAS(ncclGetErrorString)
NCCL_SHIM_ALIAS(ncclGetLastError)
NCCL_SHIM_ALIAS(ncclCommGetAsyncError)
NCCL_SHIM_ALIAS(ncclGetUniqueId)
NCCL_SHIM_ALIAS(ncclCommInitRank)
NCCL_SHIM_ALIAS(ncclCommInitRankConfig)
NCCL_SHIM_ALIAS(ncclCommInitAll)
NCCL_SHIM_ALIAS(ncclCommFinalize)
NCCL_SHIM_ALIAS(ncclCommDestroy)
NCCL_SHIM_ALIAS(ncclCommAbort)
NCCL_SHIM_ALIAS(ncclCommSplit)
NCCL_SHIM_ALIAS(ncclMemAlloc)
NCCL_SHIM_ALIAS(ncclMemFree)
NCCL_SHIM_ALIAS(ncclCommRegister)
NCCL_SHIM_ALIAS(ncclCommDeregister)
NCCL_SHIM_ALIAS(ncclCommCount)
NCCL_SHIM_ALIAS(ncclCommCuDevice)
NCCL_SHIM_ALIAS(ncclCommUserRank)
NCCL_SHIM_ALIAS(ncclRedOpCreatePreMulSum)
NCCL_SHIM_ALIAS(ncclRedOpDestroy)
NCCL_SHIM_ALIAS(ncclReduce)
NCCL_SHIM_ALIAS(ncclBcast)
NCCL_SHIM_ALIAS(ncclBroadcast)
NCCL_SHIM_ALIAS(ncclAllReduce)
NCCL_SHIM_ALIAS(ncclReduceScatter)
NCCL_SHIM_ALIAS(ncclAllGather)
NCCL_SHIM_ALIAS(ncclSend)
NCCL_SHIM_ALIAS(ncclRecv)
NCCL_SHIM_ALIAS(ncclGroupStart)
NCCL_SHIM_ALIAS(ncclGroupEnd)
