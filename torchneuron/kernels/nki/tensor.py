"""NkiTensor: a view (shape, strides, offset, dtype) on a Storage, and the view operations of the
NKI language guide (indexing, slice, reshape, permute, broadcast, select, view, ap).

On-chip (SBUF/PSUM) tensors keep dim 0 as the partition dimension: it cannot be strided, permuted
or dropped, and an integer index keeps it at size 1. HBM tensors index like numpy arrays. Views
cost nothing and share their storage; `read` and `write` are how instructions touch the memory.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from . import dtypes as dt
from .buffers import Storage
from .errors import NkiUnsupportedError, NkiValidationError, describe


# The methods of a tensor that are functions of the modules above this one: high_level_ops.py's
# operators and broadcast_to, views.py's reshaping and dynamic views, indirect.py's IndirectView,
# tensor_indirection.py's indirect, context.py's active run. Those modules hand them over as they
# load (provide()), so that this module imports none of them (no import circle); importing any
# part of the package loads them all.
_above: dict[str, Callable] = {}


def provide(**functions: Callable) -> None:
    _above.update(functions)


class DynSlice:
    """nl.ds(start, size): the slice [start, start + size)."""

    __slots__ = ("start", "size")

    def __init__(self, start, size):
        self.start, self.size = int(start), int(size)

    def as_slice(self) -> slice:
        return slice(self.start, self.start + self.size)


class NkiTensor:
    __slots__ = ("_storage", "shape", "strides", "offset", "dtype", "name")

    def __init__(self, storage: Storage, shape, strides, offset: int, dtype: dt.NkiDtype,
                 name: str = ""):
        self._storage = storage
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.offset = int(offset)
        self.dtype = dtype
        self.name = name or storage.name

    @classmethod
    def whole(cls, storage: Storage) -> "NkiTensor":
        shape = storage.shape
        strides, step = [], 1
        for s in reversed(shape):
            strides.append(step)
            step *= s
        strides.reverse()
        if storage.pitch is not None:  # explicitly placed: partitions lie a memory row apart
            strides[0] = storage.pitch
        return cls(storage, shape, tuple(strides), storage.base, storage.dtype)

    # ---- attributes ----------------------------------------------------------------------------

    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def buffer(self):
        return self._storage.buffer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def on_chip(self) -> bool:
        return self._storage.buffer.on_chip

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self):
        raise TypeError(f"NKI tensor {describe(self)} is not iterable; index it or loop over "
                        "nl.affine_range(n)")

    def __repr__(self) -> str:
        return f"NkiTensor{describe(self)}"

    def is_contiguous(self) -> bool:
        step = 1
        for size, stride in reversed(list(zip(self.shape, self.strides))):
            if size != 1 and stride != step:
                return False
            step *= size
        return True

    def is_indirect(self) -> bool:
        return False

    def get_pattern(self) -> list[list[int]]:
        return [[stride, size] for stride, size in zip(self.strides, self.shape)]

    def partition_start(self) -> int:
        return self.offset // self._storage.partition_stride if self.on_chip else 0

    def free_offset(self) -> int:
        """Element offset of this view inside each partition (on-chip tensors)."""
        return self.offset % self._storage.partition_stride if self.on_chip else self.offset

    # ---- memory ---------------------------------------------------------------------------------

    def raw(self) -> torch.Tensor:
        """This view's memory as a strided torch tensor of the dtype's storage type."""
        return self._storage.typed(self.dtype).as_strided(self.shape, self.strides, self.offset)

    def read_f32(self) -> torch.Tensor:
        return dt.to_float32(self.raw(), self.dtype)

    def write(self, values: torch.Tensor, run) -> None:
        """Stores `values` (any shape with this view's element count, float32 or integer) cast
        to this view's dtype."""
        self.check_writable()
        self._storage.prepare_write(run)
        target = self.raw()
        target.copy_(dt.from_float32(values, self.dtype).reshape(self.shape))
        self.mark_written(run)

    def write_raw(self, values: torch.Tensor, run) -> None:
        """Stores bits of this view's storage type unchanged (bit-exact copies)."""
        self.check_writable()
        self._storage.prepare_write(run)
        self.raw().copy_(values.reshape(self.shape))
        self.mark_written(run)

    def mark_written(self, run) -> None:
        """PSUM remembers written elements (nc_matmul's accumulate=None reads this)."""
        storage = self._storage
        written = storage.written
        if written is not None and self.dtype.itemsize == storage.dtype.itemsize:
            written.as_strided(self.shape, self.strides, self.offset).fill_(True)
            storage.any_written = True
            if self.size == written.numel() and self.offset == 0 and self.is_contiguous():
                storage.all_written = True

    def written_state(self):
        """True if every element of this view was written since allocation, False if none was,
        None if some were (read from the mask only when the summaries cannot tell)."""
        storage = self._storage
        if storage.pitch is None:  # an allocation of its own: its summaries are exact
            if not storage.any_written:
                return False
            if storage.all_written:
                return True
        written = self.was_written()
        return True if bool(written.all()) else False if not bool(written.any()) else None

    def was_written(self) -> torch.Tensor:
        return self._storage.written.as_strided(self.shape, self.strides, self.offset)

    def check_writable(self) -> None:
        if any(s == 0 and n > 1 for s, n in zip(self.strides, self.shape)):
            raise NkiValidationError("broadcast-write", f"{describe(self)} is a broadcast view "
                                     "(stride 0); an instruction cannot write to it")

    # ---- views -----------------------------------------------------------------------------------

    def strided_view(self, shape, strides, offset, dtype=None) -> "NkiTensor":
        """Another view of this tensor's storage: every view method (here and in views.py)
        builds its result with it; an indirect view refuses it."""
        return NkiTensor(self._storage, shape, strides, offset, dtype or self.dtype, self.name)

    def __getitem__(self, key) -> "NkiTensor":
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            at = next(i for i, k in enumerate(key) if k is Ellipsis)
            fill = self.ndim - (len(key) - 1)
            key = key[:at] + (slice(None),) * fill + key[at + 1:]
        if len(key) > self.ndim:
            raise IndexError(f"{describe(self)}: {len(key)} indices for {self.ndim} dimensions")
        key = key + (slice(None),) * (self.ndim - len(key))
        shape, strides, kept, offset = [], [], [], self.offset
        dropped_last = None
        for dim, k in enumerate(key):
            size, stride = self.shape[dim], self.strides[dim]
            if isinstance(k, DynSlice):
                k = k.as_slice()
            if isinstance(k, NkiTensor) or (hasattr(k, "shape") and not isinstance(k, int)):
                raise NkiUnsupportedError(
                    f"{describe(self)}: indexing with a tensor (dynamic or indirect addressing) "
                    "is not supported by the software NeuronCore; use static slices")
            if isinstance(k, slice):
                start, stop, step = k.start, k.stop, k.step
                step = 1 if step is None else int(step)
                if step <= 0:
                    raise NkiValidationError("index", f"{describe(self)}: slice step {step} "
                                             "must be positive")
                start = 0 if start is None else int(start)
                stop = size if stop is None else int(stop)
                start = start + size if start < 0 else start
                stop = stop + size if stop < 0 else stop
                if not (0 <= start < stop <= size):
                    raise NkiValidationError(
                        "index-bounds", f"{describe(self)}: slice {start}:{stop} of dimension "
                        f"{dim} (size {size}) is empty or outside the tensor")
                if dim == 0 and self.on_chip and step != 1:
                    raise NkiValidationError(
                        "partition-stride", f"{describe(self)}: step {step} on the partition "
                        "dimension; the hardware cannot stride across partitions")
                shape.append(-(-(stop - start) // step))
                strides.append(stride * step)
                kept.append(dim)
                offset += start * stride
            elif isinstance(k, int) or hasattr(k, "__index__"):
                i = int(k)
                i = i + size if i < 0 else i
                if not 0 <= i < size:
                    raise NkiValidationError("index-bounds", f"{describe(self)}: index {int(k)} "
                                             f"is outside dimension {dim} of size {size}")
                offset += i * stride
                if dim == 0 and self.on_chip:  # the partition dimension stays, at size 1
                    shape.append(1)
                    strides.append(stride)
                    kept.append(dim)
                else:
                    dropped_last = (dim, stride)
            elif k is None:
                raise NkiUnsupportedError(f"{describe(self)}: None (new axis) in an index; use "
                                          ".expand_dim(dim)")
            else:
                raise TypeError(f"{describe(self)}: cannot index with {k!r}")
        if self.on_chip and len(shape) < 2 and dropped_last is not None:
            # On-chip tensors stay at least 2-D: the last dropped free dim is kept at size 1.
            dim, stride = dropped_last
            pos = sum(1 for d in kept if d < dim)
            shape.insert(pos, 1)
            strides.insert(pos, stride)
        return self.strided_view(shape, strides, offset)

    def slice(self, dim: int, start: int, end: int, step: int = 1) -> "NkiTensor":
        key = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self[tuple(key)]

    def select(self, dim: int, index) -> "NkiTensor":
        if not isinstance(index, int):  # a tensor or register: resolved when an instruction runs
            return _above["dynamic_select"](self, dim, index)
        if dim == 0 and self.on_chip:
            raise NkiValidationError("partition-dim", f"{describe(self)}: select on the "
                                     "partition dimension; on-chip tensors keep dim 0")
        key = [slice(None)] * self.ndim
        key[dim] = index
        shape = list(self.shape)
        strides = list(self.strides)
        offset = self.offset + index * self.strides[dim]
        del shape[dim], strides[dim]
        return self.strided_view(shape, strides, offset)

    def reshape(self, shape) -> "NkiTensor":
        shape = list(shape) if isinstance(shape, (tuple, list)) else [shape]
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape[shape.index(-1)] = self.size // max(known, 1)
        shape = tuple(int(s) for s in shape)
        if math.prod(shape) != self.size:
            raise NkiValidationError("reshape", f"{describe(self)}: cannot reshape {self.size} "
                                     f"elements to {shape}")
        if self.on_chip and shape[0] != self.shape[0]:
            raise NkiValidationError("reshape", f"{describe(self)}: reshape to {shape} changes "
                                     "the partition dimension; on-chip reshapes keep dim 0")
        probe = torch.empty_strided(self.shape, self.strides, device="meta")
        try:
            strides = probe.view(shape).stride()
        except RuntimeError:
            raise NkiValidationError("reshape", f"{describe(self)} with strides {self.strides} "
                                     f"cannot be viewed as {shape} without moving data; copy it "
                                     "to a contiguous tensor first (nisa.tensor_copy)") from None
        return self.strided_view(shape, strides, self.offset)

    def permute(self, dims) -> "NkiTensor":
        dims = tuple(dims)
        if sorted(dims) != list(range(self.ndim)):
            raise NkiValidationError("permute", f"{describe(self)}: {dims} is not a permutation "
                                     f"of {self.ndim} dimensions")
        if self.on_chip and dims[0] != 0:
            raise NkiValidationError("partition-dim", f"{describe(self)}: permute {dims} moves "
                                     "the partition dimension; on-chip tensors keep dim 0 first")
        return self.strided_view([self.shape[d] for d in dims], [self.strides[d] for d in dims],
                          self.offset)

    def flatten_dims(self, start_dim: int, end_dim: int) -> "NkiTensor":
        return _above["flatten_dims"](self, start_dim, end_dim)

    def reshape_dim(self, dim: int, shape) -> "NkiTensor":
        return _above["reshape_dim"](self, dim, shape)

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None) -> "NkiTensor":
        return _above["rearrange"](self, src_pattern, dst_pattern, fixed_sizes)

    def vector_select(self, dim: int, vector_offset) -> "NkiTensor":
        return _above["vector_select"](self, dim, vector_offset)

    def indirect(self, index, num_elem=None) -> "NkiTensor":
        return _above["indirect"](self, index, num_elem)

    def broadcast(self, dim: int, size: int) -> "NkiTensor":
        if self.shape[dim] != 1:
            raise NkiValidationError("broadcast", f"{describe(self)}: dimension {dim} has size "
                                     f"{self.shape[dim]}; only size-1 dimensions broadcast")
        if dim == 0 and self.on_chip:
            raise NkiValidationError("partition-broadcast", f"{describe(self)}: a view cannot "
                                     "broadcast the partition dimension; use nl.broadcast_to, "
                                     "which copies the data to every partition")
        shape, strides = list(self.shape), list(self.strides)
        shape[dim], strides[dim] = int(size), 0
        return self.strided_view(shape, strides, self.offset)

    def broadcast_to(self, shape) -> "NkiTensor":
        return _above["broadcast_to"](self, shape)

    def expand_dim(self, dim: int) -> "NkiTensor":
        if dim == 0 and self.on_chip:
            raise NkiValidationError("partition-dim", f"{describe(self)}: expand_dim(0) would "
                                     "move the partition dimension")
        shape, strides = list(self.shape), list(self.strides)
        shape.insert(dim, 1)
        strides.insert(dim, strides[dim] * shape[dim + 1] if dim < len(strides) else 1)
        return self.strided_view(shape, strides, self.offset)

    def squeeze_dim(self, dim: int) -> "NkiTensor":
        if self.shape[dim] != 1:
            raise NkiValidationError("squeeze", f"{describe(self)}: dimension {dim} has size "
                                     f"{self.shape[dim]}, not 1")
        if self.on_chip and (dim == 0 or self.ndim <= 2):
            raise NkiValidationError("partition-dim", f"{describe(self)}: on-chip tensors keep "
                                     "the partition dimension and at least 2 dimensions")
        shape, strides = list(self.shape), list(self.strides)
        del shape[dim], strides[dim]
        return self.strided_view(shape, strides, self.offset)

    def view(self, dtype) -> "NkiTensor":
        """Reinterprets the bits as another dtype; the last dimension rescales."""
        dtype = dt.as_nki_dtype(dtype)
        if dtype.itemsize == self.dtype.itemsize:
            return self.strided_view(self.shape, self.strides, self.offset, dtype)
        if self.strides[-1] != 1:
            raise NkiValidationError("view", f"{describe(self)}: view({dtype}) needs the last "
                                     "dimension contiguous")
        old, new = self.dtype.itemsize, dtype.itemsize
        last_bytes = self.shape[-1] * old
        if last_bytes % new or any((s * old) % new for s in self.strides[:-1]) \
                or (self.offset * old) % new:
            raise NkiValidationError("view", f"{describe(self)}: view({dtype}) does not align "
                                     f"to {new}-byte elements")
        shape = list(self.shape[:-1]) + [last_bytes // new]
        strides = [s * old // new for s in self.strides[:-1]] + [1]
        return self.strided_view(shape, strides, self.offset * old // new, dtype)

    def ap(self, pattern, offset=None, dtype=None, scalar_offset=None, vector_offset=None,
           indirect_dim=None) -> "NkiTensor":
        """A raw access pattern [[stride, count], ...] on the underlying storage; with
        scalar_offset= or vector_offset= an indirect one (indirect.py). A stride or count may be
        an NkiScalar read at run time (NKI 0.8's dynamic access pattern, indirect.dynamic_ap)."""
        if any(isinstance(v, _above["NkiScalar"]) for entry in pattern for v in entry):
            return _above["dynamic_ap"](self, pattern, offset, dtype, scalar_offset=scalar_offset,
                                        vector_offset=vector_offset, indirect_dim=indirect_dim)
        dtype = dt.as_nki_dtype(dtype) if dtype is not None else self.dtype
        strides = [int(p[0]) for p in pattern]
        shape = [int(p[1]) for p in pattern]
        storage = self._storage
        offset = self.offset if offset is None else storage.locate(int(offset))
        if storage.pitch is not None and self.on_chip and strides[0] == storage.free_size:
            strides[0] = storage.pitch  # the kernel counts partitions in its tensor's free size
        if scalar_offset is not None or vector_offset is not None:
            return _above["IndirectView"](self, shape, strides, offset, dtype,
                                0 if indirect_dim is None else indirect_dim,
                                scalar=scalar_offset, vector=vector_offset)
        if self.on_chip and strides[0] != self._storage.partition_stride:
            raise NkiValidationError("partition-stride", f"{describe(self)}: ap partition "
                                     f"stride {strides[0]} must equal the storage's free size "
                                     f"{self._storage.partition_stride}")
        last = offset + sum((n - 1) * s for n, s in zip(shape, strides))
        if offset < 0 or last >= self._storage.typed(dtype).numel():
            raise NkiValidationError("index-bounds", f"{describe(self)}: access pattern "
                                     f"{pattern} at offset {offset} leaves the storage")
        return self.strided_view(shape, strides, offset, dtype)

    # ---- operators: the nl functions ------------------------------------------------------------

    def __add__(self, other):
        return _above["add"](self, other)

    def __radd__(self, other):
        return _above["add"](other, self)

    def __sub__(self, other):
        return _above["subtract"](self, other)

    def __rsub__(self, other):
        return _above["subtract"](other, self)

    def __mul__(self, other):
        return _above["multiply"](self, other)

    def __rmul__(self, other):
        return _above["multiply"](other, self)

    def __truediv__(self, other):
        return _above["divide"](self, other)

    def __rtruediv__(self, other):
        return _above["divide"](other, self)

    def __neg__(self):
        return _above["negative"](self)

    def __pow__(self, other):
        return _above["power"](self, other)

    def __bool__(self) -> bool:
        """`assert nl.equal(a, b)`: true when every element is nonzero (true while tracing
        shapes, when values are unknown)."""
        run = _above["active"]()
        if run is not None and not run.computes:
            return True
        return bool((self.read_f32() != 0).all())
