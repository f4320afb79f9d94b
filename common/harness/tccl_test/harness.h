/*
 * tccl_test/harness.h: what every tccl test program gets from common/harness.
 *
 * What it is: the MPI side of the tests (world rank/size, node-local rank, broadcasting a unique
 * id), deterministic per-rank inputs, simple CPU reference results for every data type and
 * reduction, element-wise comparison, and host-or-device buffers.
 *
 * Invariants:
 *  - The harness does not depend on any stage's tccl.h: types and ops are identified by the same
 *    integer values as tcclDataType_t / tcclRedOp_t (which equal NCCL's), so
 *    `static_cast<DType>(tcclFloat32)` is DType::kFloat32.
 *  - fillInput is a pure function of (rank, seed, index): any rank can compute any other
 *    rank's input, which is how references are built without communication.
 *  - Inputs are small integers (exactly representable in every type, including float16 and
 *    bfloat16), chosen so that sum/prod/max/min/avg over up to 8 ranks stay exact for integer
 *    types; floating results are compared with a tolerance (see tolerance()).
 *
 * NCCL counterpart: nccl-tests src/common.{h,cu} (InitData, CheckData) in spirit.
 * Added in: foundation (common/).
 */
#ifndef TCCL_TEST_HARNESS_H_
#define TCCL_TEST_HARNESS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tccl {
namespace test {

// ---- MPI ----------------------------------------------------------------------------------
int worldRank();
int worldSize();
/// Rank among the processes on this node (MPI_COMM_TYPE_SHARED); picks the GPU.
int localRank();
/// MPI_Bcast of `bytes` from `root` over MPI_COMM_WORLD.
void bcast(void* data, size_t bytes, int root);
/// MPI_Barrier over MPI_COMM_WORLD.
void barrier();
/// True on every rank if `ok` is true on every rank (MPI_Allreduce of a flag).
bool allRanksOk(bool ok);

// ---- Types --------------------------------------------------------------------------------
/// Same values as tcclDataType_t.
enum class DType : int {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9
};
constexpr int kNumDTypes = 10;
/// All ten, in enum order.
std::vector<DType> allDTypes();
size_t dtypeSize(DType t);
const char* dtypeName(DType t);  // "int8", "float16", ...
bool isFloat(DType t);

/// Same values as tcclRedOp_t.
enum class RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
std::vector<RedOp> allRedOps();
const char* redOpName(RedOp op);

/// Conversions used by the references (float16/bfloat16 with round-to-nearest-even).
double loadAsDouble(const void* buf, size_t i, DType t);
void storeFromDouble(void* buf, size_t i, DType t, double v);
/// The float16 / bfloat16 bit patterns behind those conversions (round to nearest, ties to even;
/// overflow to inf; NaN stays NaN). Written by hand: no CUDA headers needed.
uint16_t toHalfBits(double v);
double fromHalfBits(uint16_t bits);
uint16_t toBf16Bits(double v);
double fromBf16Bits(uint16_t bits);

// ---- Inputs and references ----------------------------------------------------------------
/// Number of ranks up to which every reduction of fillInput values is exact (see reference.cc).
constexpr int kMaxExactRanks = 8;
/// Deterministic input of `rank`: element i = a small integer derived from (rank, seed, i).
void fillInput(void* buf, size_t count, DType t, int rank, int seed);
/// The value fillInput stores at element i (in {-5..5} without 0; never negative for unsigned
/// types). Lets a test build its own expectation without a buffer.
int inputValue(size_t i, DType t, int rank, int seed);
/// Fills with a poison pattern, so an element nobody wrote is caught.
void fillPoison(void* buf, size_t bytes);
/// Reference reduction over ranks 0..nranks-1 of fillInput(.., rank, seed) for elements
/// [offset, offset+count): out[i] = op over ranks of input_r[offset + i].
void referenceReduce(void* out, size_t count, DType t, RedOp op, int nranks, int seed,
                     size_t offset = 0);
/// Tolerance (relative) for comparing a reduction of `nranks` inputs in type t: 0 for integer
/// types and for results that are exact; documented in docs (accuracy rule) for floats.
double tolerance(DType t, RedOp op, int nranks);
/// Compares count elements. Integer types must match exactly. Floats match when
/// |got - expected| <= relTol * max(|expected|, 1) (inputs are O(1) integers, so a result near 0
/// is held to the same absolute error as one near 1), or when both are NaN; a NaN where a number
/// is expected (the poison pattern) never matches. On mismatch returns false and describes the
/// first bad element (index, got, expected) and the number of bad elements in *why (may be null).
bool compare(const void* got, const void* expected, size_t count, DType t, double relTol,
             std::string* why);

// ---- Buffers ------------------------------------------------------------------------------
enum class MemKind { kHost, kDevice };
const char* memKindName(MemKind k);
/// True when this process can use a CUDA device (the harness was built with CUDA and a device
/// answers). Always false on the CPU-only CI machine.
bool haveGpu();
/// The memory kinds to test: {kHost} without a GPU, {kHost, kDevice} with one.
/// TCCL_TEST_MEM=host|device|all overrides.
std::vector<MemKind> memKinds();

/// A buffer in host or device memory. Host buffers are page-aligned heap memory.
class Buffer {
 public:
  Buffer(size_t bytes, MemKind kind);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  MemKind kind() const { return kind_; }
  /// Copies from/to host memory (synchronous; cudaMemcpy for device buffers).
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes, size_t offset = 0) const;
  /// Poisons the whole buffer.
  void poison();

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  MemKind kind_;
};

/// True when large host Buffers (16 MiB and more) are kept for reuse when freed, so that the
/// next Buffer of the same size takes the same pages without faulting them in again (never
/// under a sanitizer; environment.cc says why).
bool keepsLargeHostBuffers();

/// Waits for all device work of this process (cudaDeviceSynchronize; no-op without a GPU).
void deviceSync();

}  // namespace test
}  // namespace tccl

#endif  // TCCL_TEST_HARNESS_H_
