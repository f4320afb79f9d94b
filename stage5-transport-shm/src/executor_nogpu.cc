/*
 * executor_nogpu.cc: the GPU executor of a build without CUDA.
 *
 * What it is: an honest refusal. Without CUDA no pointer is ever classified as device memory,
 * so this is reached only through a bug; it says so rather than pretending to run.
 *
 * Added in: stage 1.
 */
#include "executor.h"

namespace tccl {

tcclResult_t launchGpuBatch(CommContext*, LaunchState&, const WorkBatch&,
                            const std::vector<DeviceCopy>&, cudaStream_t, bool) {
  TCCL_WARN("device buffers need the GPU executor, but this tccl was built without CUDA "
            "(configure with TCCL_WITH_CUDA=ON)");
  return tcclInvalidUsage;
}

// Without CUDA no communicator has a GPU: never reached.
tcclResult_t traceCalibrateGpuClock(int64_t*, int64_t*) {
  TCCL_WARN("no GPU clock to calibrate: this tccl was built without CUDA");
  return tcclInvalidUsage;
}

}  // namespace tccl
