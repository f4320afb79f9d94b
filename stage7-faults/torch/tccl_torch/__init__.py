"""tccl_torch: the torch.distributed backend "tccl".

What it is: importing this package registers the backend name "tccl" with torch.distributed,
so that

    import tccl_torch
    import torch.distributed as dist
    dist.init_process_group("tccl")          # env:// under torchrun, or tcp:// / file://

runs every collective of the default group (and of dist.new_group groups) on tccl. The C++
side is tccl_torch._C (stage4-torch/torch/csrc): ProcessGroupTccl, one per process group.

Invariants: importing twice registers once; torch 2.x gets the backend for both "cpu" and
"cuda" tensors; torch 1.13 (whose register_backend has no devices argument) gets it as its
ProcessGroup.
NCCL counterpart: none in NCCL; in PyTorch, the "nccl" entry of torch.distributed.Backend.
Added in: stage 4.
"""
import inspect

import torch  # noqa: F401  (loads libtorch before the extension that links it)
import torch.distributed as dist

from . import _C

BACKEND = "tccl"
__all__ = ["BACKEND", "library_version"]


def library_version():
    """TCCL_VERSION_CODE of the linked libtccl."""
    return _C.library_version()


def _create(store, rank, size, timeout):
    # torch calls this with the group's own (prefixed) Store, the rank and size within the
    # group, and the group's timeout (datetime.timedelta).
    return _C.create_backend(store, rank, size, timeout)


def _register():
    if hasattr(dist.Backend, BACKEND.upper()):
        return  # already registered (a second import, or importlib.reload)
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend(BACKEND, _create)


_register()
