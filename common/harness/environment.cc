/*
 * common/harness/environment.cc: where a test runs: its MPI rank, its GPU (if any), its buffers.
 *
 * What it is: thin wrappers over MPI_COMM_WORLD (rank, size, node-local rank, broadcast,
 * barrier, an all-ranks-agree flag), GPU detection, the list of memory kinds to test, and the
 * host-or-device Buffer.
 *
 * Invariants:
 *  - The MPI helpers also work in a process that never called MPI_Init (rank 0 of 1), so a
 *    helper program with its own main can use the harness without MPI.
 *  - CUDA is used only when the harness is compiled with TCCL_TEST_HAVE_CUDA; haveGpu() asks
 *    the runtime once and caches the answer. Without CUDA, a device Buffer throws
 *    std::runtime_error (a test that asks for one fails with a message instead of crashing).
 *  - Buffer errors (bad range, failed allocation or copy) throw: GoogleTest reports an
 *    exception escaping a test as that test's failure.
 *  - Large host buffers (16 MiB and more) are kept for the next Buffer of the same rounded
 *    size instead of being freed (at most 1 GiB per process; never under a sanitizer, which
 *    must see every free). Such a buffer is mapped by malloc on its own and unmapped on free,
 *    so each new one costs a page fault per 4 KiB as the test first writes it: the 64 Mi-element
 *    cases spent more time in the kernel than in the collectives (ring_large at 2 ranks: 5.1 s
 *    of system time in a 6.2 s run). A kept buffer holds the last test's bytes; every test
 *    writes (or poisons) a buffer before it reads it, as it must with malloc's memory too.
 *
 * NCCL counterpart: nccl-tests src/common.cu (device selection, buffer allocation).
 * Added in: foundation (common/).
 */
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "tccl_test/harness.h"

#ifdef TCCL_TEST_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tccl {
namespace test {
namespace {

constexpr size_t kPageSize = 4096;

bool mpiReady() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

#ifdef TCCL_TEST_HAVE_CUDA
void cudaCheck(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("tccl test harness: ") + what +
                             " failed: " + cudaGetErrorString(err));
  }
}
#endif

}  // namespace

// ---- MPI ----------------------------------------------------------------------------------

int worldRank() {
  int rank = 0;
  if (mpiReady()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int worldSize() {
  int size = 1;
  if (mpiReady()) MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int localRank() {
  // Split once; the answer cannot change during a run. Collective on the first call, so every
  // rank must reach it (mpi_main calls it before any test when a GPU is to be chosen).
  static const int rank = [] {
    if (!mpiReady()) return 0;
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int r = 0;
    MPI_Comm_rank(node, &r);
    MPI_Comm_free(&node);
    return r;
  }();
  return rank;
}

void bcast(void* data, size_t bytes, int root) {
  if (!mpiReady()) return;
  // MPI counts are int: send big payloads in pieces.
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const size_t piece = bytes < (size_t{1} << 30) ? bytes : (size_t{1} << 30);
    MPI_Bcast(p, static_cast<int>(piece), MPI_BYTE, root, MPI_COMM_WORLD);
    p += piece;
    bytes -= piece;
  }
}

void barrier() {
  if (mpiReady()) MPI_Barrier(MPI_COMM_WORLD);
}

bool allRanksOk(bool ok) {
  int mine = ok ? 1 : 0;
  int all = mine;
  if (mpiReady()) MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// ---- GPU and memory kinds -----------------------------------------------------------------

bool haveGpu() {
#ifdef TCCL_TEST_HAVE_CUDA
  static const bool have = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no device / no driver" error
      return false;
    }
    return count > 0;
  }();
  return have;
#else
  return false;
#endif
}

const char* memKindName(MemKind k) { return k == MemKind::kHost ? "host" : "device"; }

std::vector<MemKind> memKinds() {
  const char* env = std::getenv("TCCL_TEST_MEM");
  const std::string want = (env != nullptr && *env != '\0') ? env : "auto";
  if (want == "host") return {MemKind::kHost};
  if (want == "device" || want == "all") {
    if (!haveGpu()) {
      // Asked for explicitly: a silent fallback to host would make a GPU run look green.
      std::fprintf(stderr, "tccl test harness: TCCL_TEST_MEM=%s but no usable GPU\n", want.c_str());
      std::abort();
    }
    if (want == "device") return {MemKind::kDevice};
    return {MemKind::kHost, MemKind::kDevice};
  }
  if (want != "auto") {
    std::fprintf(stderr, "tccl test harness: TCCL_TEST_MEM=%s is not host|device|all\n",
                 want.c_str());
    std::abort();
  }
  if (haveGpu()) return {MemKind::kHost, MemKind::kDevice};
  return {MemKind::kHost};
}

void deviceSync() {
#ifdef TCCL_TEST_HAVE_CUDA
  if (haveGpu()) cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#endif
}

// ---- Buffer -------------------------------------------------------------------------------

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kKeepLargeBuffers = false;  // GCC's sanitizers: every free must be seen
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kKeepLargeBuffers = false;  // clang's
#else
constexpr bool kKeepLargeBuffers = true;
#endif
#else
constexpr bool kKeepLargeBuffers = true;
#endif
constexpr size_t kKeepFrom = size_t{16} << 20;  // smaller blocks come from malloc's own heap
constexpr size_t kKeepGranule = size_t{2} << 20;
constexpr size_t kKeepAtMost = size_t{1} << 30;

/// The host bytes a Buffer of `bytes` allocates: whole pages, and for a large one a multiple
/// of kKeepGranule, so that the same request finds the same size in the keep list.
size_t hostCapacity(size_t bytes) {
  const size_t granule = bytes >= kKeepFrom ? kKeepGranule : kPageSize;
  return (bytes + granule - 1) / granule * granule;
}

/// Large host blocks given back by Buffers, oldest first. Threads of one process (the
/// thread-rank tests) share it, hence the lock.
struct KeptBlocks {
  std::mutex mu;
  std::deque<std::pair<void*, size_t>> blocks;
  size_t total = 0;
};
KeptBlocks& kept() {
  static KeptBlocks* k = new KeptBlocks;  // never destroyed: Buffers may outlive statics
  return *k;
}

void* takeHost(size_t capacity) {
  if (kKeepLargeBuffers && capacity >= kKeepFrom) {
    KeptBlocks& k = kept();
    std::lock_guard<std::mutex> lock(k.mu);
    for (auto it = k.blocks.begin(); it != k.blocks.end(); ++it) {
      if (it->second != capacity) continue;
      void* p = it->first;
      k.total -= capacity;
      k.blocks.erase(it);
      return p;
    }
  }
  return std::aligned_alloc(kPageSize, capacity);
}

void giveBackHost(void* p, size_t capacity) {
  if (!kKeepLargeBuffers || capacity < kKeepFrom || capacity > kKeepAtMost) {
    std::free(p);
    return;
  }
  KeptBlocks& k = kept();
  std::lock_guard<std::mutex> lock(k.mu);
  while (k.total + capacity > kKeepAtMost) {  // the oldest go first
    std::free(k.blocks.front().first);
    k.total -= k.blocks.front().second;
    k.blocks.pop_front();
  }
  k.blocks.emplace_back(p, capacity);
  k.total += capacity;
}

}  // namespace

bool keepsLargeHostBuffers() { return kKeepLargeBuffers; }

Buffer::Buffer(size_t bytes, MemKind kind) : bytes_(bytes), kind_(kind) {
  // Never a null pointer, even for 0 bytes: a test of count 0 still passes a real address.
  const size_t alloc = bytes == 0 ? 1 : bytes;
  if (kind == MemKind::kHost) {
    ptr_ = takeHost(hostCapacity(alloc));
    if (ptr_ == nullptr) {
      throw std::runtime_error("tccl test harness: cannot allocate " + std::to_string(bytes) +
                               " bytes of host memory");
    }
    return;
  }
#ifdef TCCL_TEST_HAVE_CUDA
  if (!haveGpu()) throw std::runtime_error("tccl test harness: device buffer without a GPU");
  cudaCheck(cudaMalloc(&ptr_, alloc), "cudaMalloc");
#else
  throw std::runtime_error(
      "tccl test harness: device buffer requested, but the harness was built without CUDA");
#endif
}

Buffer::~Buffer() {
  if (ptr_ == nullptr) return;
  if (kind_ == MemKind::kHost) {
    giveBackHost(ptr_, hostCapacity(bytes_ == 0 ? 1 : bytes_));
    return;
  }
#ifdef TCCL_TEST_HAVE_CUDA
  cudaFree(ptr_);  // no throw from a destructor; a failure here surfaces in the next CUDA call
#endif
}

void Buffer::upload(const void* src, size_t bytes, size_t offset) {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    throw std::out_of_range("tccl test harness: Buffer::upload of " + std::to_string(bytes) +
                            " bytes at offset " + std::to_string(offset) + " into " +
                            std::to_string(bytes_));
  }
  char* dst = static_cast<char*>(ptr_) + offset;
  if (kind_ == MemKind::kHost) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
#ifdef TCCL_TEST_HAVE_CUDA
  cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
#endif
}

void Buffer::download(void* dst, size_t bytes, size_t offset) const {
  if (offset > bytes_ || bytes > bytes_ - offset) {
    throw std::out_of_range("tccl test harness: Buffer::download of " + std::to_string(bytes) +
                            " bytes at offset " + std::to_string(offset) + " from " +
                            std::to_string(bytes_));
  }
  const char* src = static_cast<const char*>(ptr_) + offset;
  if (kind_ == MemKind::kHost) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
#ifdef TCCL_TEST_HAVE_CUDA
  cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
#endif
}

void Buffer::poison() {
  if (kind_ == MemKind::kHost) {
    fillPoison(ptr_, bytes_);
    return;
  }
  // Build the pattern on the host with the device buffer's phase (cudaMalloc returns
  // 256-byte-aligned memory and the staging vector is at least 8-aligned, so both phases are 0).
  std::vector<uint64_t> staging((bytes_ + 7) / 8);
  fillPoison(staging.data(), bytes_);
  upload(staging.data(), bytes_);
}

}  // namespace test
}  // namespace tccl
