/*
 * examples/allreduce.cc: the ring chapter's first program: sum a vector across all ranks, then
 * average it, then sum with a custom premultiplier -- three collectives in one group.
 *
 * Learning objectives:
 *  - call a collective: every rank calls it with the same count, type and op, and every rank
 *    gets the whole result (tcclAllReduce);
 *  - in place: recvbuff == sendbuff is allowed and saves a buffer;
 *  - tcclAvg, and a custom reduction made with tcclRedOpCreatePreMulSum (sum of scalar * x);
 *  - batch several collectives with tcclGroupStart / tcclGroupEnd: one launch runs them all,
 *    in order, around the ring.
 *
 * Run:  mpirun -np 4 ./allreduce [--device]
 * Prints one line per rank, e.g. "[rank 2] allreduce: sum, avg, premulsum of 1048576 float32
 * verified OK", and exits non-zero when any rank saw a wrong value.
 *
 * NCCL counterpart: docs/examples/03_collectives/01_allreduce in NCCL's repository.
 * Added in: stage 2.
 */
#include <cmath>
#include <cstdio>
#include <vector>

#include "example_util.h"  // TCCLCHECK, host or GPU buffers, startExample, createComm

int main(int argc, char** argv) {
  // ==========================================================================
  // STEP 1: Start MPI; pick a GPU with --device (one per rank on this node)
  // ==========================================================================
  const auto [rank, nranks, useDevice] = startExample(&argc, &argv);

  // ==========================================================================
  // STEP 2: Create the communicator (as in stage 1's examples)
  // ==========================================================================
  tcclComm_t comm = createComm(rank, nranks);

  // ==========================================================================
  // STEP 3: Prepare the data. Rank r holds x_r[i] = r + (i % 7): small integers, so every
  //         sum below is exact in float32 and the check can compare with ==.
  // ==========================================================================
  const size_t count = size_t{1} << 20;
  std::vector<float> host(count);
  for (size_t i = 0; i < count; i++) host[i] = float(rank + int(i % 7));
  std::vector<float> sumOut(count, -1.0f), avgOut(count, -1.0f), scaled(host);
  void* input = placeBuffer(host, useDevice);
  void* sumbuff = placeBuffer(sumOut, useDevice);
  void* avgbuff = placeBuffer(avgOut, useDevice);
  void* inplace = placeBuffer(scaled, useDevice);  // in place: input and output in one buffer
  cudaStream_t stream = makeStream(useDevice);

  // ==========================================================================
  // STEP 4: A custom reduction: sum over ranks of (2 * x_r). The scalar is read now
  //         (tcclScalarHostImmediate); the op belongs to this communicator and type.
  // ==========================================================================
  float two = 2.0f;
  tcclRedOp_t times2;
  TCCLCHECK(tcclRedOpCreatePreMulSum(&times2, &two, tcclFloat32, tcclScalarHostImmediate, comm));

  // ==========================================================================
  // STEP 5: Three all-reduces in one group: one launch, run in order around the ring.
  // ==========================================================================
  TCCLCHECK(tcclGroupStart());
  TCCLCHECK(tcclAllReduce(input, sumbuff, count, tcclFloat32, tcclSum, comm, stream));
  TCCLCHECK(tcclAllReduce(input, avgbuff, count, tcclFloat32, tcclAvg, comm, stream));
  TCCLCHECK(tcclAllReduce(inplace, inplace, count, tcclFloat32, times2, comm, stream));
  TCCLCHECK(tcclGroupEnd());
  // The op may go as soon as the calls that use it are queued.
  TCCLCHECK(tcclRedOpDestroy(times2, comm));

  // ==========================================================================
  // STEP 6: Wait for the results and bring them to the host
  // ==========================================================================
  waitStream(stream);
  fetchBuffer(sumOut, sumbuff, useDevice);
  fetchBuffer(avgOut, avgbuff, useDevice);
  fetchBuffer(scaled, inplace, useDevice);

  // ==========================================================================
  // STEP 7: Check against the formula: sum_r (r + i%7) = n(n-1)/2 + n*(i%7). The average is
  //         compared with a tolerance: it is computed as sum of x_r * (1/n) (NCCL's rule),
  //         and 1/n is not exact in float unless n is a power of two.
  // ==========================================================================
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++) {
    const float sum = float(nranks * (nranks - 1) / 2 + nranks * int(i % 7));
    if (sumOut[i] != sum) wrong++;
    if (std::fabs(avgOut[i] - sum / float(nranks)) > 1e-5f * (1.0f + sum)) wrong++;
    if (scaled[i] != 2.0f * sum) wrong++;
  }
  if (wrong == 0) {
    std::printf("[rank %d] allreduce: sum, avg, premulsum of %zu float32 verified OK\n", rank,
                count);
  } else {
    std::printf("[rank %d] allreduce: %zu wrong values\n", rank, wrong);
  }

  // ==========================================================================
  // STEP 8: Clean up: the communicator first (it may still use the buffers), then the rest.
  // ==========================================================================
  TCCLCHECK(tcclCommDestroy(comm));
  destroyStream(stream);
  for (void* b : {input, sumbuff, avgbuff, inplace}) freeBuffer(b, useDevice);
  return finishExample(wrong != 0);  // non-zero when any rank saw wrong data
}
