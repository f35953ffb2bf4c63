"""The legacy typed names of `torch.neuron`, as `torch.cuda` has them: `torch.neuron.FloatTensor`
(a constructor, an `isinstance` check, an argument of `Tensor.type`) and the typed storages
`torch.neuron.FloatStorage` that `Tensor.storage_type()` returns.

PyTorch builds CUDA's tensor types in C++ for its own backends only; for a PrivateUse1 backend
`tensor.type()` already prints "torch.neuron.FloatTensor" and `tensor.type("torch.neuron.X")`
parses, so only the Python objects are missing. The storages follow torch.cuda's classes: the
module name "torch.neuron" is what PyTorch's `_LegacyStorage` reads to find their device."""

from __future__ import annotations

import collections.abc

import torch
from torch._utils import classproperty
from torch.storage import _LegacyStorage, _warn_typed_storage_removal

# The names and dtypes of torch.cuda's legacy tensor types and storages.
TENSOR_TYPES = {
    "DoubleTensor": torch.float64, "FloatTensor": torch.float32, "HalfTensor": torch.float16,
    "BFloat16Tensor": torch.bfloat16, "LongTensor": torch.int64, "IntTensor": torch.int32,
    "ShortTensor": torch.int16, "CharTensor": torch.int8, "ByteTensor": torch.uint8,
    "BoolTensor": torch.bool,
}
STORAGE_TYPES = {
    **{name.replace("Tensor", "Storage"): dtype for name, dtype in TENSOR_TYPES.items()},
    "ComplexDoubleStorage": torch.complex128, "ComplexFloatStorage": torch.complex64,
}

MODULE = "torch.neuron"


class _LegacyTensorMeta(type):
    """isinstance(t, torch.neuron.FloatTensor): a dense float32 tensor on neuron, as for CUDA."""

    def __instancecheck__(cls, instance) -> bool:
        return (isinstance(instance, torch.Tensor) and instance.device.type == "neuron"
                and instance.layout == torch.strided and instance.dtype == cls.dtype)


class _LegacyTensorType(metaclass=_LegacyTensorMeta):
    dtype: torch.dtype
    layout = torch.strided
    is_sparse = False
    is_cuda = False

    def __new__(cls, *args, device=None):
        """The legacy constructor's forms: (), (*sizes), (torch.Size), (sequence of data) and
        (tensor of this very type), on the current neuron device or `device`."""
        device = torch.device("neuron") if device is None else torch.device(device)
        if device.type != "neuron":
            raise RuntimeError(f"{cls.__qualname__}: legacy constructor expects device type "
                               f"neuron but got {device.type}")
        if len(args) == 1 and isinstance(args[0], torch.Tensor):
            other = args[0]
            if not isinstance(other, cls):
                raise TypeError(f"expected {MODULE}.{cls.__qualname__} (got {other.type()})")
            return other.view(other.shape)  # the same storage, as CUDA's alias
        if not args:
            return torch.empty(0, dtype=cls.dtype, device=device)
        if len(args) == 1 and isinstance(args[0], torch.Size) or \
                all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            sizes = args[0] if len(args) == 1 and isinstance(args[0], torch.Size) else args
            return torch.empty(sizes, dtype=cls.dtype, device=device)
        if len(args) == 1 and not isinstance(args[0], (str, bytes)) and (
                isinstance(args[0], collections.abc.Sequence) or hasattr(args[0], "__array__")):
            return torch.tensor(args[0], dtype=cls.dtype, device=device)
        raise TypeError(f"{MODULE}.{cls.__qualname__}(): invalid arguments "
                        f"{tuple(type(a).__name__ for a in args)}; expected (), (*sizes), "
                        f"(torch.Size), (sequence data) or ({MODULE}.{cls.__qualname__} other)")


def _tensor_type(name: str, dtype: torch.dtype) -> type:
    cls = _LegacyTensorMeta(name, (_LegacyTensorType,), {"dtype": dtype, "__module__": MODULE,
                                                         "__qualname__": name})
    # internal: see runtime/torch_internals.py "Tensor.type(cls) reads the class's C-level type name"
    # Tensor.type(cls) reads the C-level type name (tp_name), which for a Python class is its
    # __name__: the full dotted name makes `t.type(torch.neuron.FloatTensor)` parse as
    # `t.type("torch.neuron.FloatTensor")` does. __qualname__ keeps the repr
    # <class 'torch.neuron.FloatTensor'>.
    cls.__name__ = f"{MODULE}.{name}"
    return cls


class _NeuronLegacyStorage(_LegacyStorage):
    @classmethod
    def from_buffer(cls, *args, **kwargs):
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: Not available for neuron storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):
        raise RuntimeError("_new_with_weak_ptr: Not available for neuron storage")

    @classmethod
    def _new_shared_filename(cls, manager, obj, size, *, device=None, dtype=None):
        raise RuntimeError("_new_shared_filename: Not available for neuron storage")


def _storage_type(name: str, dtype: torch.dtype) -> type:
    def typed_dtype(cls):
        _warn_typed_storage_removal()
        # internal: see runtime/torch_internals.py "torch.storage._LegacyStorage"
        return cls._dtype

    return type(_NeuronLegacyStorage)(name, (_NeuronLegacyStorage,), {
        "__module__": MODULE, "__qualname__": name,
        "dtype": classproperty(typed_dtype),
        "_dtype": classproperty(lambda cls, dtype=dtype: dtype),
    })


def build() -> dict[str, type]:
    """The classes by name, for the device module to bind; the storages join
    torch._storage_classes as CUDA's do (torch.is_storage and serialization read it)."""
    classes = {name: _tensor_type(name, dtype) for name, dtype in TENSOR_TYPES.items()}
    storages = {name: _storage_type(name, dtype) for name, dtype in STORAGE_TYPES.items()}
    # internal: see runtime/torch_internals.py "torch._storage_classes"
    torch._storage_classes.update(storages.values())
    return {**classes, **storages}
