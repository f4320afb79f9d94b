/*
 * examples/neighbor_exchange.cc: the halo exchange of a 1-D stencil code on a periodic domain.
 *
 * Every rank owns `cells` interior cells of a ring-shaped domain, plus `halo` ghost cells on
 * each side that mirror its neighbours' edge cells. Before each stencil step the edges are
 * exchanged with the left and right neighbours: that is tcclNeighborExchange.
 *
 * Learning objectives:
 *  - the tcclNeighborExchange layout: sendbuff [0,count) goes to the left neighbour and
 *    [count,2count) to the right; recvbuff [0,count) comes from the left neighbour and
 *    [count,2count) from the right;
 *  - packing: the edges are copied into a contiguous send buffer and the received halos
 *    unpacked into the ghost cells (stencil codes do this with a small kernel on the GPU);
 *  - the ring wraps around: rank 0's left neighbour is rank nranks-1; with 2 ranks the left
 *    and right neighbour are the same rank, with 1 rank it is the rank itself.
 *
 * Run:  mpirun -np 4 ./neighbor_exchange [--device]
 * Prints one line per rank, e.g. "[rank 2] neighbor_exchange: 2 x 256 float64 halos from
 * ranks 1 and 3 verified OK", and exits non-zero when any rank saw wrong data.
 *
 * NCCL counterpart: none in NCCL itself (written with ncclGroupStart/ncclSend/ncclRecv there);
 * the pattern of MPI_Neighbor_alltoall on a 1-D periodic Cartesian topology.
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
  // STEP 3: The local domain: [halo ghosts | cells interior | halo ghosts]. Interior cell c
  //         of rank r holds its global index r*cells + c, so a ghost's value says which
  //         global cell it mirrors.
  // ==========================================================================
  const size_t cells = 4096, halo = 256;
  std::vector<double> domain(halo + cells + halo, -1.0);
  for (size_t c = 0; c < cells; c++) domain[halo + c] = double(size_t(rank) * cells + c);
  const int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;

  // ==========================================================================
  // STEP 4: Pack the edges: the first `halo` interior cells go left, the last go right.
  // ==========================================================================
  std::vector<double> hostSend(2 * halo), hostRecv(2 * halo, -1.0);
  std::copy(domain.begin() + halo, domain.begin() + 2 * halo, hostSend.begin());
  std::copy(domain.begin() + cells, domain.begin() + cells + halo, hostSend.begin() + halo);
  void* sendbuff = placeBuffer(hostSend, useDevice);
  void* recvbuff = placeBuffer(hostRecv, useDevice);
  cudaStream_t stream = makeStream(useDevice);

  // ==========================================================================
  // STEP 5: Exchange with both neighbours in one call (one group of two sends, two receives).
  // ==========================================================================
  TCCLCHECK(tcclNeighborExchange(sendbuff, recvbuff, halo, tcclFloat64, comm, stream));
  waitStream(stream);
  fetchBuffer(hostRecv, recvbuff, useDevice);

  // ==========================================================================
  // STEP 6: Unpack: what came from the left fills the left ghosts (it is the left
  //         neighbour's right edge), what came from the right fills the right ghosts.
  // ==========================================================================
  std::copy(hostRecv.begin(), hostRecv.begin() + halo, domain.begin());
  std::copy(hostRecv.begin() + halo, hostRecv.end(), domain.begin() + halo + cells);

  // ==========================================================================
  // STEP 7: Check the ghosts against the global indices they mirror (periodic domain).
  // ==========================================================================
  const size_t global = size_t(nranks) * cells;
  const size_t first = size_t(rank) * cells;
  size_t wrong = 0;
  for (size_t g = 0; g < halo; g++) {
    size_t leftCell = (first + global - halo + g) % global;  // just before our first cell
    size_t rightCell = (first + cells + g) % global;         // just after our last cell
    if (domain[g] != double(leftCell)) wrong++;
    if (domain[halo + cells + g] != double(rightCell)) wrong++;
  }
  if (wrong == 0)
    std::printf(
        "[rank %d] neighbor_exchange: 2 x %zu float64 halos from ranks %d and %d "
        "verified OK\n",
        rank, halo, left, right);
  else
    std::printf("[rank %d] neighbor_exchange: %zu of %zu ghost cells wrong\n", rank, wrong,
                2 * halo);

  // ==========================================================================
  // STEP 8: Clean up.
  // ==========================================================================
  TCCLCHECK(tcclCommDestroy(comm));
  destroyStream(stream);
  freeBuffer(sendbuff, useDevice);
  freeBuffer(recvbuff, useDevice);
  return finishExample(wrong != 0);  // non-zero when any rank saw wrong data
}
