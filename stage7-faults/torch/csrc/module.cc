/**
 * module.cc: the Python module tccl_torch._C: the backend's creator and the library version.
 *
 * What it is: the one place that speaks pybind11. torch's own bindings (imported first, by
 * tccl_torch/__init__.py) register c10d::Store and the backend base class with
 * c10::intrusive_ptr holders, so create_backend can take the Store torch hands to a creator
 * and return the backend as torch's own type (torch 2.x: torch._C._distributed_c10d.Backend;
 * 1.13: ProcessGroup). The Python package registers it under the name "tccl".
 *
 * Invariants: create_backend releases the GIL while the communicator is created (it waits for
 * every rank of the group); the timeout torch passes (a datetime.timedelta) becomes the
 * backend's watchdog limit (op_queue.h).
 * NCCL counterpart: ProcessGroupNCCL is constructed by torch's own init.cpp bindings; a
 *   third-party backend uses this route (PyTorch's test/cpp_extensions/cpp_c10d_extension.cpp).
 * Added in: stage 4.
 */
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>

#include "process_group_tccl.h"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<tccl_torch::BackendBase> createBackend(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const std::chrono::duration<float>& timeout) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  // Other ranks' creators must be able to run (threads in this process, e.g. tests that start
  // ranks as threads) while this one waits for them in tcclCommInitRank.
  py::gil_scoped_release release;
  return tccl_torch::createProcessGroupTccl(store, rank, size, ms);
}

int libraryVersion() {
  int v = 0;
  if (tcclGetVersion(&v) != tcclSuccess) return -1;
  return v;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "tccl_torch._C: the torch.distributed backend 'tccl' (see tccl_torch/__init__.py)";
  m.def("create_backend", &createBackend, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"),
        "Creates the backend object of one process group (torch calls it through the creator "
        "registered for 'tccl').");
  m.def("library_version", &libraryVersion,
        "TCCL_VERSION_CODE of the libtccl this module is linked with.");
}
