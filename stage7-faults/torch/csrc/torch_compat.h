/**
 * torch_compat.h: the few places where torch 1.13 and torch 2.x differ, in one file.
 *
 * What it is: the backend base class (torch 1.13: c10d::ProcessGroup, whose subclasses were
 * the process groups themselves; torch 2.x: c10d::Backend, which a c10d::ProcessGroup owns one
 * of per device type) and the headers that moved. Everything else in csrc/ is written once.
 *
 * Invariants: TCCL_TORCH_CUDA is 1 exactly when the torch we build against has CUDA (CMake
 * sets it from torch_probe.py); no file includes c10/cuda headers without it.
 * NCCL counterpart: none (PyTorch's ProcessGroupNCCL lives inside torch and follows one version).
 * Added in: stage 4.
 */
#ifndef TCCL_TORCH_COMPAT_H_
#define TCCL_TORCH_COMPAT_H_

#include <torch/version.h>

#include <chrono>

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <string>
#include <type_traits>

#if TCCL_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace tccl_torch {

#if TORCH_VERSION_MAJOR >= 2
/// torch 2.x: a ProcessGroup (what Python holds) dispatches to one Backend per device type.
using BackendBase = c10d::Backend;
#else
/// torch 1.13: a custom backend is the ProcessGroup itself.
using BackendBase = c10d::ProcessGroup;
#endif

#if TORCH_VERSION_MAJOR >= 2
constexpr c10d::OpType kCoalescedOpType = c10d::OpType::COALESCED;
#else
constexpr c10d::OpType kCoalescedOpType = c10d::OpType::UNKNOWN;  // 1.13 has no COALESCED
#endif

// ---- error messages -------------------------------------------------------------------------
// Our error messages are built as plain strings, numbers through std::to_string, and handed to
// TORCH_CHECK as one string. Measured on torch 2.11 (pip wheel): a TORCH_CHECK whose message
// streams an integer into c10::str's ostringstream from this extension crashed the process
// (SIGSEGV) instead of raising, while string-only messages raised cleanly.
inline void appendPart(std::string& s, const char* v) { s += v; }
inline void appendPart(std::string& s, const std::string& v) { s += v; }
inline void appendPart(std::string& s, c10::ScalarType v) { s += c10::toString(v); }
inline void appendPart(std::string& s, const c10::Device& v) { s += v.str(); }
inline void appendPart(std::string& s, c10::Layout v) {
  s += v == c10::kStrided ? "Strided" : v == c10::kSparse ? "Sparse" : "non-strided";
}
template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
void appendPart(std::string& s, T v) {
  s += std::to_string(v);
}
template <typename... Args>
std::string message(const Args&... args) {
  std::string s;
  (appendPart(s, args), ...);
  return s;
}

}  // namespace tccl_torch

/// TORCH_CHECK with the message made by tccl_torch::message (see above): raises c10::Error
/// (a Python RuntimeError) when `cond` is false.
#define TCCL_TORCH_CHECK(cond, ...)                           \
  do {                                                        \
    if (C10_UNLIKELY(!(cond))) {                              \
      TORCH_CHECK(false, ::tccl_torch::message(__VA_ARGS__)); \
    }                                                         \
  } while (0)

namespace tccl_torch {

/// Work::wait's "no timeout" (kNoTimeout is a global in 1.13 and c10d::kNoTimeout in 2.x;
/// both are 0 ms).
constexpr std::chrono::milliseconds kWaitForever{0};

}  // namespace tccl_torch

#endif  // TCCL_TORCH_COMPAT_H_
