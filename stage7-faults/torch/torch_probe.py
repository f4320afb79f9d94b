"""torch_probe.py: what CMake needs to build a torch C++ extension, asked of torch itself.

What it is: run by stage4-torch/torch/CMakeLists.txt as `<python> torch_probe.py`; prints one
`KEY=VALUE` line per fact (lists joined with '|': CMake splits the output into lines at ';').
Asking the interpreter, rather than find_package(Torch), works the same for Debian's
python3-torch 1.13 (no usable TorchConfig for an extension) and a pip wheel of torch 2.x (whose
TorchConfig wants the whole CUDA toolkit layout it was built with).

Invariants: prints nothing but KEY=VALUE lines; exits 1 with a message on stderr when torch
cannot be imported, so CMake can say why the backend is not built.
NCCL counterpart: none (PyTorch's own torch.utils.cpp_extension does the same probing).
Added in: stage 4.
"""
import os
import sys
import sysconfig

try:
    import torch
    import torch.utils.cpp_extension as cpp_ext
except Exception as exc:  # any failure means: no backend, say why
    print(f"cannot import torch with {sys.executable}: {exc}", file=sys.stderr)
    sys.exit(1)

cuda = torch.version.cuda is not None
# include_paths() prints a warning when it looks for CUDA on a machine without it: silence it.
with open(os.devnull, "w") as null:
    saved, sys.stderr = sys.stderr, null
    try:
        includes = cpp_ext.include_paths()
        libdirs = cpp_ext.library_paths()
    finally:
        sys.stderr = saved

facts = {
    "TORCH_VERSION": torch.__version__.split("+")[0],
    "TORCH_CUDA": "1" if cuda else "0",
    "TORCH_CXX11_ABI": "1" if torch._C._GLIBCXX_USE_CXX11_ABI else "0",
    "TORCH_INCLUDE_DIRS": "|".join(includes),
    "TORCH_LIBRARY_DIR": libdirs[0],
    "PYTHON_INCLUDE_DIR": sysconfig.get_paths()["include"],
    "PYTHON_EXT_SUFFIX": sysconfig.get_config_var("EXT_SUFFIX") or ".so",
}
for key, value in facts.items():
    print(f"{key}={value}")
