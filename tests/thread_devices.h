/*
 * tests/thread_devices.h: the CUDA devices of ranks that are threads of one process.
 *
 * What it is: tcclCommInitAll(comms, n, nullptr) gives rank i CUDA device i, as NCCL's
 * ncclCommInitAll does, and fails with tcclInvalidArgument on a machine with fewer than n
 * devices (on a machine without a GPU every rank is a host rank). The in-process tests run 1 to
 * 5 ranks wherever they are built, a one-GPU laptop included, so they pass a device list
 * instead: rank i on device i % count, the MPI harness's mapping. Several ranks may share a
 * GPU; these tests move host buffers, so no kernel of theirs competes for it.
 *
 * Invariants: without a GPU, or in a build without CUDA, the list is empty and the tests pass
 * nullptr, which is what they did before there were GPUs.
 *
 * NCCL counterpart: none (NCCL refuses two ranks on one GPU); the harness's local % count.
 * Added in: stage 1 (tests).
 */
#ifndef TCCL_TESTS_THREAD_DEVICES_H_
#define TCCL_TESTS_THREAD_DEVICES_H_

#include <vector>

#ifdef TCCL_TEST_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tccl_test {

/// Rank i's device for n ranks in this process: i % the device count; empty without a GPU.
inline std::vector<int> threadRankDevices(int n) {
  int count = 0;
#ifdef TCCL_TEST_HAVE_CUDA
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" error
    count = 0;
  }
#endif
  std::vector<int> devs;
  for (int i = 0; count > 0 && i < n; i++) devs.push_back(i % count);
  return devs;
}

/// tcclCommInitAll's devlist argument for `devs` (null: rank i on device i, or no GPU).
inline const int* devlistOrNull(const std::vector<int>& devs) {
  return devs.empty() ? nullptr : devs.data();
}

}  // namespace tccl_test

#endif  // TCCL_TESTS_THREAD_DEVICES_H_
