"""Host access to device memory from Python, under the memory-protected runtime
(NEURON_MEMORY_PROTECT=1, csrc/runtime/ProtectedMemory.h): device memory is inaccessible to the
host except inside a window. Work that Python runs on device memory through the seam opens one
(`window()`; a compiled graph's kernels, `kernel_launcher()`); a path this mode cannot make safe
refuses by name (`refuse()`; DLPack export, `guard_dlpack_export()`). In the default runtime a
window costs one call and refuses nothing."""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator

import torch
import torch.utils.dlpack

from .._C import runtime as _runtime_c

MODE = "NEURON_MEMORY_PROTECT=1"


def protected() -> bool:
    """Whether this process runs the memory-protected runtime (known once it is configured)."""
    return _runtime_c.memory_protected()


@contextlib.contextmanager
def window() -> Iterator[None]:
    """Device memory is host-accessible inside (nested and concurrent windows count)."""
    _runtime_c.open_host_access()
    try:
        yield
    finally:
        _runtime_c.close_host_access()


def refuse(what: str, instead: str) -> None:
    """Raises RuntimeError naming the mode when it is on: `what` reaches device memory in a way
    no window can cover (a pointer handed out of the process's control)."""
    if protected():
        raise RuntimeError(f"neuron: {what} is refused under {MODE} (device memory is "
                           f"inaccessible to the host outside the runtime seam); {instead}")


def kernel_launcher(launch: Callable) -> Callable:
    """`launch` (a compiled graph's kernel launcher), running each kernel inside a window when
    memory is protected: the kernel's C++ code reads and writes its buffers in place."""
    if not protected():
        return launch

    def launch_in_window(*args):
        with window():
            return launch(*args)

    return launch_in_window


DLPACK_INSTEAD = ("copy the tensor to the CPU first (tensor.cpu()) and export that, or run "
                  "without " + MODE)


def _refusing_neuron(export: Callable) -> Callable:
    @functools.wraps(export)
    def export_unless_neuron(tensor, *args, **kwargs):
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "neuron":
            refuse("exporting a neuron tensor through DLPack (its consumer reads the device "
                   "address in place)", DLPACK_INSTEAD)
        return export(tensor, *args, **kwargs)

    return export_unless_neuron


def guard_dlpack_export() -> None:
    """At import (a reference taken before the runtime is configured must see it too): under the
    mode, DLPack export hands a consumer the raw address of device memory, which it reads outside
    any window, so a neuron tensor's export is refused by name rather than left to stop the
    consumer's process. CPU tensors, and every tensor in the default runtime, export as before."""
    # internal: see runtime/torch_internals.py "torch.Tensor.__dlpack__"
    torch.Tensor.__dlpack__ = _refusing_neuron(torch.Tensor.__dlpack__)
    # internal: see runtime/torch_internals.py "torch.Tensor.__dlpack__"
    torch.utils.dlpack.to_dlpack = _refusing_neuron(torch.utils.dlpack.to_dlpack)
    # internal: see runtime/torch_internals.py "torch.Tensor.__dlpack__"
    torch.to_dlpack = _refusing_neuron(torch.to_dlpack)
