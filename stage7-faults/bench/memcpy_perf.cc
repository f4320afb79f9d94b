/*
 * bench/memcpy_perf.cc: the GPU's own device-to-device copy rate, the yardstick of chapter 5.
 *
 * What it is: cudaMemcpyAsync from one device buffer to another, -n copies back to back per
 * size with one synchronisation at the end (tccl_perf's timing), printed as the bytes moved
 * per second (each copy reads and writes `size` bytes; the figure counts `size` once, as
 * nccl-tests' algbw does). Chapter 5's targets are ratios to it: two ranks sharing one GPU
 * can, together, move bytes at most about this fast.
 *   memcpy_perf [-b minbytes] [-e maxbytes] [-f factor] [-n iters]
 *
 * Invariants: no MPI, no tccl: a process of its own, so nothing else shares the GPU's copy
 * engines or SMs while it measures (run it before or after the ranks, not beside them).
 * NCCL counterpart: none (nccl-tests has no copy yardstick; NCCL's own one-rank path is a copy).
 * Added in: stage 5.
 */
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = strtod(s, &end);
  switch (end && *end ? *end : ' ') {
    case 'K':
    case 'k':
      v *= 1024;
      break;
    case 'M':
    case 'm':
      v *= 1024 * 1024;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return size_t(v);
}

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fprintf(stderr, "memcpy_perf: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  size_t minBytes = 8, maxBytes = size_t(256) << 20;
  int factor = 2, iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b"))
      minBytes = parseSize(argv[i + 1]);
    else if (!strcmp(argv[i], "-e"))
      maxBytes = parseSize(argv[i + 1]);
    else if (!strcmp(argv[i], "-f"))
      factor = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-n"))
      iters = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: memcpy_perf [-b min] [-e max] [-f factor] [-n iters]\n");
      return 2;
    }
  }
  if (factor < 2 || iters < 1 || minBytes == 0 || minBytes > maxBytes) return 2;
  void *src = nullptr, *dst = nullptr;
  cudaStream_t s;
  if (!check(cudaMalloc(&src, maxBytes), "cudaMalloc") ||
      !check(cudaMalloc(&dst, maxBytes), "cudaMalloc") ||
      !check(cudaMemset(src, 1, maxBytes), "cudaMemset") ||
      !check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream")) {
    return 1;
  }
  printf("# memcpy_perf: cudaMemcpyAsync device to device, %d copies per size\n", iters);
  printf("# %12s %12s %12s\n", "size(B)", "time(us)", "GB/s");
  for (size_t n = minBytes; n <= maxBytes; n *= size_t(factor)) {
    // One warm-up copy, then the timed ones.
    if (!check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s), "copy") ||
        !check(cudaStreamSynchronize(s), "sync")) {
      return 1;
    }
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++) cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
    if (!check(cudaStreamSynchronize(s), "sync")) return 1;
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        iters;
    printf("  %12zu %12.2f %12.2f\n", n, us, double(n) / us / 1e3);
  }
  cudaFree(src);
  cudaFree(dst);
  cudaStreamDestroy(s);
  return 0;
}
