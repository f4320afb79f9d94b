/*
 * examples/sendrecv.cc: the first tccl program: every rank passes a buffer to its right-hand
 * neighbour on a ring, once with tcclSendRecv and once written out with a group.
 *
 * Learning objectives:
 *  - create a communicator from MPI: one rank makes a tcclUniqueId, MPI_Bcast shares it,
 *    every rank calls tcclCommInitRank;
 *  - move data with point-to-point calls, on host buffers (default) or GPU buffers (--device);
 *  - see why a send and a receive with different peers must sit in one group: with blocking
 *    calls every rank would wait in tcclSend for a receive its neighbour has not posted yet;
 *  - free everything in the right order.
 *
 * Run:  mpirun -np 4 ./sendrecv [--device]
 * Prints one line per rank, e.g. "[rank 2] sendrecv: 1048576 float32 from rank 1 verified OK",
 * and exits non-zero when any rank saw wrong data.
 *
 * NCCL counterpart: docs/examples/02_point_to_point/01_ring_pattern in NCCL's repository.
 * Added in: stage 1.
 */
#include <cstdio>
#include <vector>

#include "example_util.h"  // TCCLCHECK, host or GPU buffers, startExample, createComm

int main(int argc, char** argv) {
  // ==========================================================================
  // STEP 1: Start MPI; learn this process's rank and the number of ranks; with --device,
  //         pick one GPU per rank (example_util.h shows how)
  // ==========================================================================
  const auto [rank, nranks, useDevice] = startExample(&argc, &argv);

  // ==========================================================================
  // STEP 2: Create the communicator. Rank 0 makes the unique id (its bootstrap address and
  //         a secret); MPI carries it to everyone; every rank joins with its own rank.
  // ==========================================================================
  tcclComm_t comm = createComm(rank, nranks);

  // ==========================================================================
  // STEP 3: Prepare the data. Rank r sends the values 1000*r + (i % 1000); it will receive
  //         the values of its left-hand neighbour.
  // ==========================================================================
  const size_t count = size_t{1} << 20;
  const int right = (rank + 1) % nranks;
  const int left = (rank + nranks - 1) % nranks;
  std::vector<float> hostSend(count), hostRecv(count, -1.0f);
  for (size_t i = 0; i < count; i++) hostSend[i] = float(1000 * rank + int(i % 1000));
  void* sendbuff = placeBuffer(hostSend, useDevice);
  void* recvbuff = placeBuffer(hostRecv, useDevice);
  cudaStream_t stream = makeStream(useDevice);

  // ==========================================================================
  // STEP 4: The ring shift in one call: send to the right, receive from the left.
  //         tcclSendRecv is a group of one send and one receive.
  // ==========================================================================
  TCCLCHECK(tcclSendRecv(sendbuff, recvbuff, count, tcclFloat32, right, left, comm, stream));

  // ==========================================================================
  // STEP 5: The same shift written out. The group matters: each rank sends AND receives, and
  //         both are launched together at tcclGroupEnd. (Same buffers, same result: STEP 7
  //         checks it.)
  // ==========================================================================
  TCCLCHECK(tcclGroupStart());
  TCCLCHECK(tcclSend(sendbuff, count, tcclFloat32, right, comm, stream));
  TCCLCHECK(tcclRecv(recvbuff, count, tcclFloat32, left, comm, stream));
  TCCLCHECK(tcclGroupEnd());

  // ==========================================================================
  // STEP 6: Wait for the data. Host-buffer calls are complete when they return; device calls
  //         are queued on the stream, so wait for it, then copy the result back.
  // ==========================================================================
  waitStream(stream);
  fetchBuffer(hostRecv, recvbuff, useDevice);

  // ==========================================================================
  // STEP 7: Check: every value must be the left neighbour's.
  // ==========================================================================
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++)
    if (hostRecv[i] != float(1000 * left + int(i % 1000))) wrong++;
  if (wrong == 0)
    std::printf("[rank %d] sendrecv: %zu float32 from rank %d verified OK\n", rank, count, left);
  else
    std::printf("[rank %d] sendrecv: %zu of %zu values wrong\n", rank, wrong, count);

  // ==========================================================================
  // STEP 8: Clean up: the communicator first (it may still use the buffers), then the rest.
  // ==========================================================================
  TCCLCHECK(tcclCommDestroy(comm));
  destroyStream(stream);
  freeBuffer(sendbuff, useDevice);
  freeBuffer(recvbuff, useDevice);
  return finishExample(wrong != 0);  // non-zero when any rank saw wrong data
}
