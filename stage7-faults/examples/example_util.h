/*
 * examples/example_util.h: the plumbing every example shares, so that each example file shows
 * only its own pattern:
 *  - TCCLCHECK / CUDACHECK: check a call, print file:line and why it failed, abort all ranks;
 *  - placeBuffer / fetchBuffer / freeBuffer: a buffer that lives in host memory (default) or in
 *    GPU memory (--device), filled from and copied back to a host std::vector;
 *  - makeStream / waitStream / destroyStream: the stream device calls are queued on;
 *  - startExample (STEP 1), createComm (STEP 2), finishExample (the exit code).
 *
 * Invariants: header-only, included by exactly one source file per program. Without CUDA
 * (TCCL_EXAMPLE_HAVE_CUDA unset) every helper works on host memory and the stream is nullptr,
 * which tccl's host-buffer path accepts. Every failure ends in MPI_Abort, so an example never
 * hangs waiting for a rank that has died.
 *
 * NCCL counterpart: the common utilities of NCCL's examples (docs/examples/common/include/
 * utils.h, mpi_utils.h, nccl_utils.h in NCCL's repository).
 * Added in: stage 1.
 */
#pragma once

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tccl.h"

#ifdef TCCL_EXAMPLE_HAVE_CUDA
#include <cuda_runtime.h>
#define CUDACHECK(cmd)                                                                           \
  do {                                                                                           \
    cudaError_t e = (cmd);                                                                       \
    if (e != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d CUDA error: %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                              \
    }                                                                                            \
  } while (0)
#endif

// Every tccl call returns a tcclResult_t; tcclGetLastError says why a call failed.
#define TCCLCHECK(cmd)                                                                             \
  do {                                                                                             \
    tcclResult_t r = (cmd);                                                                        \
    if (r != tcclSuccess) {                                                                        \
      std::fprintf(stderr, "%s:%d tccl error %s: %s\n", __FILE__, __LINE__, tcclGetErrorString(r), \
                   tcclGetLastError(nullptr));                                                     \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                                \
    }                                                                                              \
  } while (0)

// ---- Buffers and streams ---------------------------------------------------------------------
// Buffers live in host memory, or in GPU memory with --device. These helpers hide the
// difference so the steps of an example read the same either way.

/// A buffer holding a copy of `host`: `host` itself, or a new GPU buffer with --device.
template <typename T>
inline void* placeBuffer(std::vector<T>& host, bool device) {
#ifdef TCCL_EXAMPLE_HAVE_CUDA
  if (device) {
    void* d = nullptr;
    CUDACHECK(cudaMalloc(&d, host.size() * sizeof(T) + 1));  // +1: never a null pointer
    CUDACHECK(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyDefault));
    return d;
  }
#endif
  (void)device;
  return host.data();
}
/// Brings a buffer made by placeBuffer back into `host` (nothing to do for host buffers).
template <typename T>
inline void fetchBuffer(std::vector<T>& host, void* buf, bool device) {
#ifdef TCCL_EXAMPLE_HAVE_CUDA
  if (device) CUDACHECK(cudaMemcpy(host.data(), buf, host.size() * sizeof(T), cudaMemcpyDefault));
#endif
  (void)host, (void)buf, (void)device;
}
inline void freeBuffer(void* buf, bool device) {
#ifdef TCCL_EXAMPLE_HAVE_CUDA
  if (device) CUDACHECK(cudaFree(buf));
#endif
  (void)buf, (void)device;
}
// Device calls are queued on a stream; host calls ignore it (nullptr is fine for them).
inline cudaStream_t makeStream(bool device) {
  cudaStream_t s = nullptr;
#ifdef TCCL_EXAMPLE_HAVE_CUDA
  if (device) CUDACHECK(cudaStreamCreate(&s));
#endif
  (void)device;
  return s;
}
inline void waitStream(cudaStream_t s) {
#ifdef TCCL_EXAMPLE_HAVE_CUDA
  if (s != nullptr) CUDACHECK(cudaStreamSynchronize(s));
#endif
  (void)s;
}
inline void destroyStream(cudaStream_t s) {
#ifdef TCCL_EXAMPLE_HAVE_CUDA
  if (s != nullptr) CUDACHECK(cudaStreamDestroy(s));
#endif
  (void)s;
}

// ---- Start and end of an example -------------------------------------------------------------

/// Who this process is, and where its buffers live. (An example unpacks it:
/// `const auto [rank, nranks, useDevice] = startExample(&argc, &argv);`.)
struct ExampleContext {
  int rank = 0;
  int nranks = 1;
  bool useDevice = false;  // --device: GPU buffers
};

/// STEP 1 of every example: start MPI, learn this process's rank and the number of ranks, and
/// with --device pick one GPU per rank: the rank's index among the ranks on its node.
/// --device in a build without CUDA ends the program (exit code 2).
inline ExampleContext startExample(int* argc, char*** argv) {
  MPI_Init(argc, argv);
  ExampleContext ctx;
  MPI_Comm_rank(MPI_COMM_WORLD, &ctx.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ctx.nranks);
  ctx.useDevice = *argc > 1 && std::strcmp((*argv)[1], "--device") == 0;
#ifndef TCCL_EXAMPLE_HAVE_CUDA
  if (ctx.useDevice) {
    if (ctx.rank == 0) std::fprintf(stderr, "--device: this example was built without CUDA\n");
    MPI_Finalize();
    std::exit(2);
  }
#else
  if (ctx.useDevice) {
    MPI_Comm local;
    int localRank = 0, ndev = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, ctx.rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &localRank);
    MPI_Comm_free(&local);
    CUDACHECK(cudaGetDeviceCount(&ndev));
    CUDACHECK(cudaSetDevice(localRank % ndev));
  }
#endif
  return ctx;
}

/// STEP 2 of every example: create the communicator. Rank 0 makes the unique id (its bootstrap
/// address and a secret); MPI carries it to everyone; every rank joins with its own rank.
inline tcclComm_t createComm(int rank, int nranks) {
  tcclUniqueId id;
  if (rank == 0) TCCLCHECK(tcclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  tcclComm_t comm;
  TCCLCHECK(tcclCommInitRank(&comm, nranks, id, rank));
  return comm;
}

/// The last lines of every example: every rank learns whether any rank saw wrong data (so all
/// exit with the same code), MPI ends, and the result is main's return value (0 = all OK).
inline int finishExample(bool failed) {
  int bad = failed ? 1 : 0, anyBad = 0;
  MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return anyBad ? 1 : 0;
}
