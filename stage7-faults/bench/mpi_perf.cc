/*
 * bench/mpi_perf.cc: the tccl_perf table for MPI itself, so tccl can be compared with MPI in
 * the same run.
 *
 *   mpirun -np 2 --mca btl tcp,self tccl_mpi_perf -t sendrecv|alltoall|allreduce [-b minbytes]
 *          [-e maxbytes] [-f factor | -i step] [-n iters] [-w warmup] [-c 0|1] [-d type] [-a 0..3]
 *
 * What it is: the same sizes, timing and columns as tccl_perf (see tccl_perf.cc), for
 *  - sendrecv: MPI_Sendrecv in the shift pattern of tcclSendRecv(sendPeer = rank+1,
 *    recvPeer = rank-1), i.e. nccl-tests' sendrecv;
 *  - alltoall: MPI_Alltoall;
 *  - allreduce (stage 2): MPI_Allreduce, float sum.
 * Host memory only. With `--mca btl tcp,self` Open MPI moves the bytes over TCP sockets, as
 * tccl's stage-1 socket transport does: the baseline the socket transport should match.
 *
 * Invariants: the element type only sets the element size (the data is moved as bytes of an
 * MPI type of that size); busbw factors and the #wrong check are tccl_perf's, shared through
 * perf_common.h with the options and the table.
 *
 * NCCL counterpart: none (nccl-tests measures NCCL only); OSU micro-benchmarks in spirit.
 * Added in: stage 1.
 */
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "perf_common.h"

namespace {

using perf::Counts;

struct TypeInfo {
  const char* name;
  MPI_Datatype type;  // an MPI type of the same size (the bytes are only moved)
  size_t size;
};
const TypeInfo kTypes[] = {{"int8", MPI_INT8_T, 1},   {"uint8", MPI_UINT8_T, 1},
                           {"int32", MPI_INT32_T, 4}, {"uint32", MPI_UINT32_T, 4},
                           {"int64", MPI_INT64_T, 8}, {"uint64", MPI_UINT64_T, 8},
                           {"half", MPI_UINT16_T, 2}, {"float", MPI_FLOAT, 4},
                           {"double", MPI_DOUBLE, 8}, {"bfloat16", MPI_UINT16_T, 2}};

struct MpiOp {
  const char* name;
  Counts (*counts)(size_t count, int nranks);
  void (*run)(const void* send, void* recv, size_t count, MPI_Datatype t, int rank, int nranks);
  double (*busBwFactor)(int nranks);
  void (*fill)(uint8_t* send, const Counts& c, size_t typeSize, int rank, int nranks);
  size_t (*check)(const uint8_t* recv, const Counts& c, size_t typeSize, int rank, int nranks);
};

// The calls. Sizes, input and check of each operation: perf_common.h (tccl_perf's own).
void sendRecvRun(const void* send, void* recv, size_t count, MPI_Datatype t, int rank, int nranks) {
  MPI_Sendrecv(send, int(count), t, (rank + 1) % nranks, 0, recv, int(count), t,
               (rank + nranks - 1) % nranks, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
void alltoAllRun(const void* send, void* recv, size_t count, MPI_Datatype t, int, int) {
  MPI_Alltoall(send, int(count), t, recv, int(count), t, MPI_COMM_WORLD);
}

// allreduce (stage 2): MPI_Allreduce, float sum (-d float only: the bytes are summed as
// floats), the same inputs as tccl_perf's allreduce: small integers, so the sums are exact.
Counts allReduceCounts(size_t count, int) { return {count, count, count}; }
void allReduceRun(const void* send, void* recv, size_t count, MPI_Datatype, int, int) {
  MPI_Allreduce(send, recv, int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
double busBwAllReduce(int nranks) { return 2.0 * (nranks - 1) / nranks; }
void allReduceFill(uint8_t* send, const Counts& c, size_t, int rank, int) {
  for (size_t i = 0; i < c.send; i++) {
    float v = float(1 + (size_t(rank) + i) % 3);
    std::memcpy(send + 4 * i, &v, 4);
  }
}
size_t allReduceCheck(const uint8_t* recv, const Counts& c, size_t, int, int nranks) {
  size_t wrong = 0;
  for (size_t i = 0; i < c.param; i++) {
    float want = 0, got;
    for (int r = 0; r < nranks; r++) want += float(1 + (size_t(r) + i) % 3);
    std::memcpy(&got, recv + 4 * i, 4);
    if (got != want) wrong++;
  }
  return wrong;
}

using namespace perf;  // the entries' sizes, busbw factors, fills and checks
const MpiOp kOps[] = {
    {"sendrecv", sendRecvCounts, sendRecvRun, busBwOne, sendRecvFill, sendRecvCheck},
    {"alltoall", alltoAllCounts, alltoAllRun, busBwAlltoAll, alltoAllFill, alltoAllCheck},
    {"allreduce", allReduceCounts, allReduceRun, busBwAllReduce, allReduceFill, allReduceCheck},
};

void usage() {
  std::fprintf(stderr, "usage: tccl_mpi_perf -t op (host memory only; -r is ignored)\n%s  ops:",
               perf::optionsUsage());
  for (const MpiOp& op : kOps) std::fprintf(stderr, " %s", op.name);
  std::fprintf(stderr, "\n  types:");
  for (const TypeInfo& t : kTypes) std::fprintf(stderr, " %s", t.name);
  std::fprintf(stderr, "\n");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  perf::Options o;
  const MpiOp* op = nullptr;
  const TypeInfo* type = nullptr;
  if (perf::parseOptions(argc, argv, &o) && !o.device) {
    for (const MpiOp& x : kOps)
      if (o.op == x.name) op = &x;
    for (const TypeInfo& t : kTypes)
      if (o.type == t.name) type = &t;
  }
  if (op == nullptr || type == nullptr) {
    if (rank == 0) usage();
    MPI_Finalize();
    return 2;
  }

  if (rank == 0) {
    std::printf(
        "# tccl_mpi_perf %s (MPI): nranks %d minBytes %zu maxBytes %zu warmup iters: %d "
        "iters: %d validation: %d memory: host\n",
        op->name, nranks, o.minBytes, o.maxBytes, o.warmup, o.iters, o.check);
    perf::printTableHeader();
  }
  const size_t ts = type->size;
  const double factor = op->busBwFactor(nranks);
  long long totalWrong = 0;
  double busBwSum = 0;
  int points = 0;
  size_t bytes = o.minBytes;
  do {
    const Counts cnt = op->counts(bytes / ts, nranks);
    if (cnt.param > size_t(INT32_MAX)) {  // MPI counts are int
      if (rank == 0) std::printf("# %zu elements: past MPI's int count, stopping\n", cnt.param);
      break;
    }
    std::vector<uint8_t> send(cnt.send * ts + 1), recv(cnt.recv * ts + 1);
    op->fill(send.data(), cnt, ts, rank, nranks);
    for (int i = 0; i < o.warmup; i++)
      op->run(send.data(), recv.data(), cnt.param, type->type, rank, nranks);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < o.iters; i++)
      op->run(send.data(), recv.data(), cnt.param, type->type, rank, nranks);
    perf::Result r;
    r.sec = perf::combineTime((MPI_Wtime() - t0) / o.iters, o.average, nranks);
    if (o.check) {
      std::fill(recv.begin(), recv.end(), uint8_t(0xa5));
      op->run(send.data(), recv.data(), cnt.param, type->type, rank, nranks);
      long long mine = (long long)op->check(recv.data(), cnt, ts, rank, nranks);
      MPI_Allreduce(&mine, &r.wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      totalWrong += r.wrong;
    }
    const size_t reportBytes = std::max(cnt.send, cnt.recv) * ts;
    busBwSum += r.busBw(reportBytes, factor);
    points++;
    if (rank == 0) perf::printRow(reportBytes, ts, type->name, r, perf::Result{}, false, factor);
  } while (perf::nextSize(&bytes, o));
  if (rank == 0) perf::printFooter(totalWrong, busBwSum, points);
  MPI_Finalize();
  return totalWrong ? 1 : 0;
}
