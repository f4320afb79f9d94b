/*
 * bench/tccl_perf.cc: an nccl-tests-style benchmark of tccl, one MPI rank per process.
 *
 *   mpirun -np 2 tccl_perf -t sendrecv|alltoall|allreduce|allgather|reducescatter|broadcast|reduce
 *                          [-b minbytes] [-e maxbytes] [-f factor | -i step]
 *          [-n iters] [-w warmup] [-c check 0/1] [-d type] [-m host|device] [-a 0..3] [-r root]
 *
 * What it is: nccl-tests' table for tccl. For each size: -w warmup calls, then -n calls back to
 * back timed on the host wall clock with one synchronisation at the end (cudaStreamSynchronize
 * for device buffers; host-buffer calls are complete when they return), the per-rank time
 * combined over ranks as nccl-tests -a does (default: average), algbw = bytes / time and
 * busbw = algbw * the operation's factor (nccl-tests' definitions: sendrecv 1, alltoall
 * (n-1)/n with bytes = the whole buffer). With -c 1, one more call on freshly filled buffers is
 * checked element by element and the mismatches are summed over ranks (#wrong). In-place does
 * not apply to the stage-1 operations (NCCL has no in-place alltoall; a sendrecv whose send and
 * receive buffers are the same memory is a race), so those columns print N/A.
 *
 * Invariants: every rank runs the same sizes in the same order; the exit code is non-zero when
 * any check found a wrong element or any call failed.
 *
 * Extending it: a later stage adds a collective with ONE entry in kOps (name, buffer sizes,
 * run, busbw factor, input fill and reference check, in-place support).
 * What tccl_mpi_perf shares (options, test data, table): perf_common.h. The collectives' sizes,
 * inputs and checks (stage 2): perf_collectives.h.
 *
 * NCCL counterpart: nccl-tests src/common.cu (the driver) + src/sendrecv.cu, src/alltoall.cu.
 * Added in: stage 1.
 */
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "perf_collectives.h"
#include "perf_common.h"
#include "tccl.h"

#ifdef TCCL_PERF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace {

using perf::Counts;
using perf::Result;

void die(const char* what, const char* why) {
  std::fprintf(stderr, "tccl_perf: %s: %s\n", what, why);
  MPI_Abort(MPI_COMM_WORLD, 1);
}
#define PERF_TCCL(cmd)                                           \
  do {                                                           \
    tcclResult_t r_ = (cmd);                                     \
    if (r_ != tcclSuccess) die(#cmd, tcclGetLastError(nullptr)); \
  } while (0)
#ifdef TCCL_PERF_HAVE_CUDA
#define PERF_CUDA(cmd)                                        \
  do {                                                        \
    cudaError_t e_ = (cmd);                                   \
    if (e_ != cudaSuccess) die(#cmd, cudaGetErrorString(e_)); \
  } while (0)
#endif

// ---- Types ---------------------------------------------------------------------------------
struct TypeInfo {
  const char* name;
  tcclDataType_t type;
  size_t size;
};
const TypeInfo kTypes[] = {{"int8", tcclInt8, 1},      {"uint8", tcclUint8, 1},
                           {"int32", tcclInt32, 4},    {"uint32", tcclUint32, 4},
                           {"int64", tcclInt64, 8},    {"uint64", tcclUint64, 8},
                           {"half", tcclFloat16, 2},   {"float", tcclFloat32, 4},
                           {"double", tcclFloat64, 8}, {"bfloat16", tcclBfloat16, 2}};

// ---- The operation table -------------------------------------------------------------------
/// What one call needs. Counts are in elements.
struct RunArgs {
  const void* sendbuff;
  void* recvbuff;
  size_t count;  // nccl-tests' "paramcount": the count argument of the call
  tcclDataType_t type;
  int root;
  int rank, nranks;
  tcclComm_t comm;
  cudaStream_t stream;
};

struct PerfOp {
  const char* name;
  Counts (*counts)(size_t count, int nranks);
  tcclResult_t (*run)(const RunArgs& a);
  double (*busBwFactor)(int nranks);
  /// Byte i of the input rank `rank` sends; the check recomputes it for the sender.
  void (*fill)(uint8_t* send, const Counts& c, size_t typeSize, int rank, int nranks);
  /// Counts wrong elements of recv (host copy) on rank `rank`.
  size_t (*check)(const uint8_t* recv, const Counts& c, size_t typeSize, int rank, int nranks);
  bool inPlace;  // whether the operation has an in-place form (else those columns say N/A)
};

// The calls. Sizes, input and check of each operation: perf_common.h (shared with MPI's table).
tcclResult_t sendRecvRun(const RunArgs& a) {  // send to rank+1, receive from rank-1
  return tcclSendRecv(a.sendbuff, a.recvbuff, a.count, a.type, (a.rank + 1) % a.nranks,
                      (a.rank + a.nranks - 1) % a.nranks, a.comm, a.stream);
}
tcclResult_t alltoAllRun(const RunArgs& a) {
  return tcclAlltoAll(a.sendbuff, a.recvbuff, a.count, a.type, a.comm, a.stream);
}
// The collectives (stage 2); reductions are sums.
tcclResult_t allReduceRun(const RunArgs& a) {
  return tcclAllReduce(a.sendbuff, a.recvbuff, a.count, a.type, tcclSum, a.comm, a.stream);
}
tcclResult_t allGatherRun(const RunArgs& a) {
  return tcclAllGather(a.sendbuff, a.recvbuff, a.count, a.type, a.comm, a.stream);
}
tcclResult_t reduceScatterRun(const RunArgs& a) {
  return tcclReduceScatter(a.sendbuff, a.recvbuff, a.count, a.type, tcclSum, a.comm, a.stream);
}
tcclResult_t broadcastRun(const RunArgs& a) {
  return tcclBroadcast(a.sendbuff, a.recvbuff, a.count, a.type, a.root, a.comm, a.stream);
}
tcclResult_t reduceRun(const RunArgs& a) {
  return tcclReduce(a.sendbuff, a.recvbuff, a.count, a.type, tcclSum, a.root, a.comm, a.stream);
}

using namespace perf;  // the entries' sizes, busbw factors, fills and checks
const PerfOp kOps[] = {
    {"sendrecv", sendRecvCounts, sendRecvRun, busBwOne, sendRecvFill, sendRecvCheck, false},
    {"alltoall", alltoAllCounts, alltoAllRun, busBwAlltoAll, alltoAllFill, alltoAllCheck, false},
    {"allreduce", allReduceCounts, allReduceRun, busBwAllReduce, valuesFill, allReduceCheck, true},
    {"allgather", allGatherCounts, allGatherRun, busBwGather, blockFill, allGatherCheck, false},
    {"reducescatter", reduceScatterCounts, reduceScatterRun, busBwGather, valuesFill,
     reduceScatterCheck, false},
    {"broadcast", allReduceCounts, broadcastRun, busBwOne, blockFill, broadcastCheck, true},
    {"reduce", allReduceCounts, reduceRun, busBwOne, valuesFill, reduceCheck, true},
};

// ---- One run: options, the op and type they name, the communicator -------------------------
struct Bench {
  perf::Options o;
  const PerfOp* op = nullptr;
  const TypeInfo* type = nullptr;
  int rank = 0, nranks = 1;
  tcclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

/// Parses the command line and finds the op (-t) and type (-d) it names.
bool parseBench(int argc, char** argv, Bench* b) {
  if (!perf::parseOptions(argc, argv, &b->o)) return false;
  for (const PerfOp& op : kOps)
    if (b->o.op == op.name) b->op = &op;
  for (const TypeInfo& t : kTypes)
    if (b->o.type == t.name) b->type = &t;
  if (b->op == nullptr || b->type == nullptr) return false;
  perf::gType = b->type->type;  // the collectives' typed fill and check
  perf::gRoot = b->o.root;
  return true;
}

void usage() {
  std::fprintf(stderr, "usage: tccl_perf -t op\n%s  ops:", perf::optionsUsage());
  for (const PerfOp& op : kOps) std::fprintf(stderr, " %s", op.name);
  std::fprintf(stderr, "\n  types:");
  for (const TypeInfo& t : kTypes) std::fprintf(stderr, " %s", t.name);
  std::fprintf(stderr, "\n");
}

// ---- Buffers -------------------------------------------------------------------------------
/// Host memory (page-aligned) or device memory; host staging for fills and checks.
struct Buf {
  void* ptr = nullptr;
  size_t bytes = 0;
  bool device = false;
  Buf(size_t n, bool dev) { alloc(n, dev); }
  ~Buf() { release(); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  void alloc(size_t n, bool dev) {
    bytes = n;
    device = dev;
#ifdef TCCL_PERF_HAVE_CUDA
    if (dev) {
      PERF_CUDA(cudaMalloc(&ptr, n + 1));
      return;
    }
#endif
    ptr = std::aligned_alloc(4096, (n + 4096) / 4096 * 4096);
    if (ptr == nullptr) die("aligned_alloc", "out of memory");
  }
  void release() {
#ifdef TCCL_PERF_HAVE_CUDA
    if (device) {
      PERF_CUDA(cudaFree(ptr));
      return;
    }
#endif
    std::free(ptr);
  }
  void upload(const std::vector<uint8_t>& h) {
#ifdef TCCL_PERF_HAVE_CUDA
    if (device) {
      PERF_CUDA(cudaMemcpy(ptr, h.data(), h.size(), cudaMemcpyDefault));
      return;
    }
#endif
    std::memcpy(ptr, h.data(), h.size());
  }
  void download(std::vector<uint8_t>* h) const {
#ifdef TCCL_PERF_HAVE_CUDA
    if (device) {
      PERF_CUDA(cudaMemcpy(h->data(), ptr, h->size(), cudaMemcpyDefault));
      return;
    }
#endif
    std::memcpy(h->data(), ptr, h->size());
  }
};

void syncStream(cudaStream_t s) {
#ifdef TCCL_PERF_HAVE_CUDA
  if (s != nullptr) PERF_CUDA(cudaStreamSynchronize(s));
#endif
  (void)s;
}

/// Times one size (warmup, then iters back to back, one sync) and, with -c 1, checks one more
/// call on fresh input.
Result runPoint(const Bench& b, const Counts& c, bool inPlace) {
  const perf::Options& o = b.o;
  const size_t ts = b.type->size;
  // Out of place: two buffers. In place: one, with send and recv at their offsets in it.
  const size_t baseElems = std::max(c.send, c.recv);
  Buf sendBuf(inPlace ? 0 : c.send * ts, o.device);
  Buf recvBuf((inPlace ? baseElems : c.recv) * ts, o.device);
  char* base = static_cast<char*>(recvBuf.ptr);
  void* sendbuff = inPlace ? base + c.inPlaceSendOffset * ts : sendBuf.ptr;
  void* recvbuff = inPlace ? base + c.inPlaceRecvOffset * ts : recvBuf.ptr;

  // Input: the op's fill of the send region; elsewhere a pattern the check would reject.
  std::vector<uint8_t> input(c.send * ts);
  b.op->fill(input.data(), c, ts, b.rank, b.nranks);
  auto loadInput = [&] {
    if (!inPlace) {
      sendBuf.upload(input);
      std::vector<uint8_t> poison(c.recv * ts, 0xa5);
      recvBuf.upload(poison);
      return;
    }
    std::vector<uint8_t> whole(baseElems * ts, 0xa5);
    std::memcpy(whole.data() + c.inPlaceSendOffset * ts, input.data(), input.size());
    recvBuf.upload(whole);
  };
  loadInput();
  RunArgs a{sendbuff, recvbuff, c.param, b.type->type, o.root, b.rank, b.nranks, b.comm, b.stream};

  for (int i = 0; i < o.warmup; i++) PERF_TCCL(b.op->run(a));
  syncStream(b.stream);
  MPI_Barrier(MPI_COMM_WORLD);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; i++) PERF_TCCL(b.op->run(a));
  syncStream(b.stream);
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Result r;
  r.sec = perf::combineTime(sec / o.iters, o.average, b.nranks);

  if (o.check) {
    loadInput();  // in place, the timed calls overwrote the input
    PERF_TCCL(b.op->run(a));
    syncStream(b.stream);
    std::vector<uint8_t> whole(recvBuf.bytes);
    recvBuf.download(&whole);
    const uint8_t* got = whole.data() + (inPlace ? c.inPlaceRecvOffset * ts : 0);
    long long mine = (long long)b.op->check(got, c, ts, b.rank, b.nranks);
    MPI_Allreduce(&mine, &r.wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  }
  return r;
}

/// -m device: one GPU per rank, the rank's index among the ranks on its node. False when the
/// build has no CUDA.
bool selectDevice(int rank) {
#ifdef TCCL_PERF_HAVE_CUDA
  MPI_Comm local;
  int localRank = 0, ndev = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &localRank);
  MPI_Comm_free(&local);
  PERF_CUDA(cudaGetDeviceCount(&ndev));
  PERF_CUDA(cudaSetDevice(localRank % ndev));
  return true;
#else
  (void)rank;
  return false;
#endif
}

/// The header, as nccl-tests prints it: the run's parameters and where every rank runs.
void printHeader(const Bench& b) {
  const perf::Options& o = b.o;
  int dev = -1;
  tcclCommCuDevice(b.comm, &dev);
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  std::vector<char> hosts(64 * b.nranks);
  std::vector<int> devs(b.nranks), pids(b.nranks);
  int pid = int(getpid());
  MPI_Gather(host, 64, MPI_CHAR, hosts.data(), 64, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Gather(&dev, 1, MPI_INT, devs.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Gather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (b.rank != 0) return;
  std::printf(
      "# tccl_perf %s: nranks %d minBytes %zu maxBytes %zu step: %s warmup iters: %d "
      "iters: %d validation: %d memory: %s\n#\n# Using devices\n",
      b.op->name, b.nranks, o.minBytes, o.maxBytes,
      o.stepBytes ? (std::to_string(o.stepBytes) + "(bytes)").c_str()
                  : (std::to_string(o.factor) + "(factor)").c_str(),
      o.warmup, o.iters, o.check, o.device ? "device" : "host");
  for (int r = 0; r < b.nranks; r++)
    std::printf("#  Rank %2d Pid %6d on %10s device %2d [%s]\n", r, pids[r], &hosts[64 * r],
                devs[r], o.device ? "cuda" : "host memory");
  perf::printTableHeader();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  Bench b;
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
  if (!parseBench(argc, argv, &b)) {
    if (b.rank == 0) usage();
    MPI_Finalize();
    return 2;
  }
  if (b.o.device && !selectDevice(b.rank)) {
    if (b.rank == 0) std::fprintf(stderr, "tccl_perf: -m device: built without CUDA\n");
    MPI_Finalize();
    return 2;
  }

  tcclUniqueId id;
  if (b.rank == 0) PERF_TCCL(tcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  PERF_TCCL(tcclCommInitRank(&b.comm, b.nranks, id, b.rank));
#ifdef TCCL_PERF_HAVE_CUDA
  if (b.o.device) PERF_CUDA(cudaStreamCreate(&b.stream));
#endif
  printHeader(b);

  const size_t ts = b.type->size;
  const double factor = b.op->busBwFactor(b.nranks);
  long long totalWrong = 0;
  double busBwSum = 0;
  int points = 0;
  size_t bytes = b.o.minBytes;
  do {
    const Counts c = b.op->counts(bytes / ts, b.nranks);
    Result outOfPlace = runPoint(b, c, false);
    Result inPlace = b.op->inPlace ? runPoint(b, c, true) : Result{};
    const size_t reportBytes = std::max(c.send, c.recv) * ts;
    totalWrong += std::max(outOfPlace.wrong, 0LL) + std::max(inPlace.wrong, 0LL);
    busBwSum += outOfPlace.busBw(reportBytes, factor);
    points++;
    if (b.rank == 0)
      perf::printRow(reportBytes, ts, b.type->name, outOfPlace, inPlace, b.op->inPlace, factor);
  } while (perf::nextSize(&bytes, b.o));
  if (b.rank == 0) perf::printFooter(totalWrong, busBwSum, points);

  PERF_TCCL(tcclCommDestroy(b.comm));
#ifdef TCCL_PERF_HAVE_CUDA
  if (b.stream != nullptr) PERF_CUDA(cudaStreamDestroy(b.stream));
#endif
  MPI_Finalize();
  return totalWrong ? 1 : 0;
}
