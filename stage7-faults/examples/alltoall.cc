/*
 * examples/alltoall.cc: every rank sends a different block to every rank (a transpose of the
 * blocks across ranks), first with tcclAlltoAll, then written out as grouped sends/receives.
 *
 * Learning objectives:
 *  - the all-to-all layout: block j of sendbuff goes to rank j, block i of recvbuff comes from
 *    rank i, so the buffers hold nranks * count elements;
 *  - one group can hold a send and a receive for every peer (itself included): nothing
 *    deadlocks, because tcclGroupEnd launches them all together;
 *  - tcclAlltoAll is exactly that group (as in NCCL's documentation before ncclAlltoAll existed).
 *
 * Run:  mpirun -np 4 ./alltoall [--device]
 * Prints one line per rank, e.g. "[rank 2] alltoall: 4 x 1024 int32 verified OK", and exits
 * non-zero when any rank saw wrong data.
 *
 * NCCL counterpart: the all-to-all of NCCL's docs (usage/p2p.html) and ncclAlltoAll (2.28).
 * Added in: stage 1.
 */
#include <cstdint>
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
  // STEP 3: Prepare the data. Element i of the block that rank r sends to rank j is
  //         1000000*r + 1000*j + (i % 1000): the receiver can tell where every value came from.
  // ==========================================================================
  const size_t count = 1024;  // elements per block (per peer)
  std::vector<int32_t> hostSend(nranks * count), hostRecv(nranks * count, -1);
  for (int j = 0; j < nranks; j++)
    for (size_t i = 0; i < count; i++)
      hostSend[j * count + i] = 1000000 * rank + 1000 * j + int32_t(i % 1000);
  void* sendbuff = placeBuffer(hostSend, useDevice);
  void* recvbuff = placeBuffer(hostRecv, useDevice);
  cudaStream_t stream = makeStream(useDevice);

  // ==========================================================================
  // STEP 4: All-to-all in one call.
  // ==========================================================================
  TCCLCHECK(tcclAlltoAll(sendbuff, recvbuff, count, tcclInt32, comm, stream));

  // ==========================================================================
  // STEP 5: The same, written out: one send and one receive per peer, all in one group.
  //         Block offsets are in bytes of the element type.
  // ==========================================================================
  TCCLCHECK(tcclGroupStart());
  for (int peer = 0; peer < nranks; peer++) {
    const char* sendBlock = static_cast<const char*>(sendbuff) + peer * count * sizeof(int32_t);
    char* recvBlock = static_cast<char*>(recvbuff) + peer * count * sizeof(int32_t);
    TCCLCHECK(tcclSend(sendBlock, count, tcclInt32, peer, comm, stream));
    TCCLCHECK(tcclRecv(recvBlock, count, tcclInt32, peer, comm, stream));
  }
  TCCLCHECK(tcclGroupEnd());

  // ==========================================================================
  // STEP 6: Wait for the data (device buffers) and bring it back to the host.
  // ==========================================================================
  waitStream(stream);
  fetchBuffer(hostRecv, recvbuff, useDevice);

  // ==========================================================================
  // STEP 7: Check: block i came from rank i and was meant for us.
  // ==========================================================================
  size_t wrong = 0;
  for (int i = 0; i < nranks; i++)
    for (size_t k = 0; k < count; k++)
      if (hostRecv[i * count + k] != 1000000 * i + 1000 * rank + int32_t(k % 1000)) wrong++;
  if (wrong == 0)
    std::printf("[rank %d] alltoall: %d x %zu int32 verified OK\n", rank, nranks, count);
  else
    std::printf("[rank %d] alltoall: %zu of %zu values wrong\n", rank, wrong, nranks * count);

  // ==========================================================================
  // STEP 8: Clean up.
  // ==========================================================================
  TCCLCHECK(tcclCommDestroy(comm));
  destroyStream(stream);
  freeBuffer(sendbuff, useDevice);
  freeBuffer(recvbuff, useDevice);
  return finishExample(wrong != 0);  // non-zero when any rank saw wrong data
}
