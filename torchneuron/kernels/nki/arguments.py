"""A kernel's arguments and results: torch tensors (neuron or CPU), numpy arrays, and the fake
tensors of torch.compile's tracing, as HBM tensors of the kernel and back.

Neuron tensors are read and written through the C++ core's CPU alias of their memory
(torchneuron._C.aten.cpu_alias, the one host-access check); numpy arrays share memory with torch
CPU tensors, so a kernel's writes to an argument reach the caller's array.
"""

from __future__ import annotations

import numpy as np
import torch

from . import buffers as buf
from . import dtypes as dt
from .context import cpu_view
from .errors import NkiTypeError, NkiValidationError, describe
from .objects import attributes, is_object, with_attributes
from .tensor import NkiTensor


def is_fake(t: torch.Tensor) -> bool:
    """Fake tensors (torch.compile's tracing) and meta tensors have memory on no device."""
    return t.untyped_storage().device.type == "meta"


def tensors_in(value):
    if isinstance(value, (torch.Tensor, np.ndarray)):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from tensors_in(v)
    elif is_object(value):
        yield from tensors_in(attributes(value))


class CallFrame:
    """How one call's arguments map to kernel tensors, and its results back."""

    def __init__(self, kernel_name: str, args, kwargs):
        self.kernel_name = kernel_name
        found = list(tensors_in((args, kwargs)))
        self.numpy = bool(found) and all(isinstance(t, np.ndarray) for t in found)
        torch_tensors = [t for t in found if isinstance(t, torch.Tensor)]
        self.tracing = any(is_fake(t) for t in torch_tensors)
        devices = {t.device for t in torch_tensors}
        if len(devices) > 1:
            names = ", ".join(sorted(str(d) for d in devices))
            raise RuntimeError(f"Expected all tensors to be on the same device, but NKI kernel "
                               f"{kernel_name} got tensors on {names}")
        self.device = next(iter(devices)) if devices else torch.device("cpu")
        self.storages: dict = {}  # key -> Storage
        self.tensors: dict[int, torch.Tensor] = {}  # id(Storage) -> the caller's tensor

    def wrap(self, value, name: str):
        if isinstance(value, np.ndarray):
            if any(s < 0 for s in value.strides):
                raise NkiTypeError(f"argument {name}: numpy arrays with negative strides cannot "
                                   "be kernel arguments")
            if value.dtype == np.float64:
                raise NkiTypeError(f"argument {name}: float64 is not an NKI data type (convert "
                                   "to float32)")
            return self.wrap_tensor(torch.from_numpy(value), name)
        if isinstance(value, torch.Tensor):
            return self.wrap_tensor(value, name)
        if isinstance(value, (list, tuple)):
            return type(value)(self.wrap(v, f"{name}[{i}]") for i, v in enumerate(value))
        if isinstance(value, dict):
            return {k: self.wrap(v, f"{name}[{k!r}]") for k, v in value.items()}
        if is_object(value):
            return with_attributes(value, {k: self.wrap(v, f"{name}.{k}")
                                           for k, v in attributes(value).items()})
        return value

    def wrap_tensor(self, t: torch.Tensor, name: str) -> NkiTensor:
        try:
            dtype = dt.as_nki_dtype(t.dtype)
        except NkiTypeError as e:
            raise NkiTypeError(f"argument {name} of NKI kernel {self.kernel_name}: {e}") from None
        if t.dim() == 0:
            raise NkiTypeError(f"argument {name} of NKI kernel {self.kernel_name} is a 0-d "
                               "tensor; kernel tensors have at least one dimension")
        if t.layout != torch.strided:
            raise NkiTypeError(f"argument {name}: {t.layout} tensors cannot be kernel arguments")
        if self.tracing:
            key = ("fake", id(t))
            data = None
        else:
            key = t.untyped_storage().data_ptr()
        storage = self.storages.get(key)
        if storage is None:
            if self.tracing:
                numel = t.untyped_storage().nbytes() // dtype.itemsize
                data = torch.empty(max(numel, t.storage_offset() + 1), dtype=dtype.storage,
                                   device="meta")
            else:
                data = cpu_view(t, dtype)
            storage = buf.Storage(buf.hbm, data, dtype, (data.numel(),), name, argument=True)
            self.storages[key] = storage
            self.tensors[id(storage)] = t
        return NkiTensor(storage, t.shape, t.stride(), t.storage_offset(), dtype, name)

    def unwrap(self, value, run):
        if isinstance(value, NkiTensor):
            return self.unwrap_tensor(value, run)
        if isinstance(value, (list, tuple)):
            return type(value)(self.unwrap(v, run) for v in value)
        if isinstance(value, dict):
            return {k: self.unwrap(v, run) for k, v in value.items()}
        return value

    def unwrap_tensor(self, t: NkiTensor, run):
        if t.buffer.kind != "hbm":
            raise NkiValidationError("kernel-output", f"NKI kernel {self.kernel_name} returns "
                                     f"{describe(t)}, which lives on chip; a kernel returns HBM "
                                     "tensors: nisa.dma_copy it into an nl.ndarray(..., "
                                     "buffer=nl.shared_hbm) and return that")
        storage = t.storage
        if t.dtype.itemsize != storage.dtype.itemsize:
            raise NkiTypeError(f"NKI kernel {self.kernel_name} returns a reinterpreting view "
                               f"{describe(t)} of a different element size")
        torch_dtype = dt.torch_dtype_of(t.dtype)
        base = self.tensors.get(id(storage))
        if base is None:  # allocated by the kernel
            if self.tracing:
                return torch.empty_strided(t.shape, t.strides, dtype=torch_dtype,
                                           device=self.device)
            base = run.hbm_tensors[id(storage)]
        if base.dtype != torch_dtype:
            base = base.view(torch_dtype)
        result = base.as_strided(t.shape, t.strides, t.offset)
        if self.numpy and torch_dtype in (torch.float16, torch.float32, torch.int8, torch.int16,
                                          torch.int32, torch.uint8, torch.bool):
            return result.numpy()
        return result
