/*
 * examples/gather_scatter.cc: the root hands out work (scatter), every rank works on its
 * piece, the root collects the results (gather).
 *
 * Learning objectives:
 *  - rooted patterns: scatter sends block i of the root's buffer to rank i; gather puts rank i's
 *    buffer into block i of the root's buffer;
 *  - "significant on the root only": the other ranks may pass NULL for the root's big buffer;
 *  - the root talks to every rank (nranks - 1 messages), the others only to the root, so the
 *    root's link is the bottleneck of both patterns.
 *
 * Run:  mpirun -np 4 ./gather_scatter [--device]
 * Prints one line per rank, e.g.
 * "[rank 2] gather_scatter: scatter 4096 float32 from root 0, gather verified OK",
 * and exits non-zero when any rank saw wrong data.
 *
 * NCCL counterpart: ncclScatter / ncclGather (2.28) and the gather/scatter of NCCL's P2P docs.
 * Added in: stage 1.
 */
#include <algorithm>
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
  // STEP 3: Prepare the data. Only the root has the whole array: element k of block i is
  //         i + k/10000.0 (exact in float32 for these sizes).
  // ==========================================================================
  const int root = 0;
  const size_t count = 4096;  // elements per rank
  std::vector<float> hostAll(rank == root ? nranks * count : 0);
  for (int i = 0; i < nranks && rank == root; i++)
    for (size_t k = 0; k < count; k++) hostAll[i * count + k] = float(i) + float(k) / 10000.0f;
  std::vector<float> hostPiece(count, -1.0f);
  // Non-root ranks pass NULL for the root-only buffer.
  void* allbuff = rank == root ? placeBuffer(hostAll, useDevice) : nullptr;
  void* piecebuff = placeBuffer(hostPiece, useDevice);
  cudaStream_t stream = makeStream(useDevice);

  // ==========================================================================
  // STEP 4: Scatter: block i of the root's buffer lands in rank i's piece.
  // ==========================================================================
  TCCLCHECK(tcclScatter(allbuff, piecebuff, count, tcclFloat32, root, comm, stream));
  waitStream(stream);
  fetchBuffer(hostPiece, piecebuff, useDevice);
  size_t wrong = 0;
  for (size_t k = 0; k < count; k++)
    if (hostPiece[k] != float(rank) + float(k) / 10000.0f) wrong++;

  // ==========================================================================
  // STEP 5: "Work" on the piece: double every value. (In a real program: a GPU kernel.)
  // ==========================================================================
  for (float& v : hostPiece) v *= 2.0f;
  if (useDevice) {
    freeBuffer(piecebuff, useDevice);
    piecebuff = placeBuffer(hostPiece, useDevice);
  }

  // ==========================================================================
  // STEP 6: Gather: every rank's piece lands in block `rank` of the root's buffer.
  // ==========================================================================
  if (rank == root) std::fill(hostAll.begin(), hostAll.end(), -1.0f);
  if (rank == root && useDevice) {
    freeBuffer(allbuff, useDevice);
    allbuff = placeBuffer(hostAll, useDevice);
  }
  TCCLCHECK(tcclGather(piecebuff, allbuff, count, tcclFloat32, root, comm, stream));
  waitStream(stream);

  // ==========================================================================
  // STEP 7: Check on the root: block i holds rank i's doubled piece.
  // ==========================================================================
  if (rank == root) {
    fetchBuffer(hostAll, allbuff, useDevice);
    for (int i = 0; i < nranks; i++)
      for (size_t k = 0; k < count; k++)
        if (hostAll[i * count + k] != 2.0f * (float(i) + float(k) / 10000.0f)) wrong++;
  }
  if (wrong == 0)
    std::printf("[rank %d] gather_scatter: scatter %zu float32 from root %d, gather verified OK\n",
                rank, count, root);
  else
    std::printf("[rank %d] gather_scatter: %zu values wrong\n", rank, wrong);

  // ==========================================================================
  // STEP 8: Clean up.
  // ==========================================================================
  TCCLCHECK(tcclCommDestroy(comm));
  destroyStream(stream);
  if (allbuff != nullptr) freeBuffer(allbuff, useDevice);
  freeBuffer(piecebuff, useDevice);
  return finishExample(wrong != 0);  // non-zero when any rank saw wrong data
}
