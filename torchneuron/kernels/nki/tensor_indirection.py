"""`NkiTensor.indirect(index, num_elem=None)`: tensor indirection (TI) of NeuronCore-v4, where one
compute instruction reads (a gather) or writes (a scatter) columns of an on-chip tensor at
offsets an SBUF tensor holds, so the kernel picks them at run time.

As AWS's reference documents it (NkiTensor.indirect and the "NKI Tensor Indirection" deep dive):
- the data tensor is in SBUF or PSUM; the index tensor is an SBUF tensor of uint16 offsets, shape
  (P, K) with P the data's partitions; the view is (P, num_elem), num_elem defaulting to
  index.size;
- partitions form groups of G adjacent partitions (G = 16 for the Vector, Scalar and GpSimd
  Engines, 32 for the Tensor Engine); every partition of a group uses the same offsets, read from
  the group's own rows of the index tensor in a snake pattern: offset i is
  index[group_start + i % G, i // G];
- an offset is the position of one element along the free dimension of the data tensor.

Where the reference is silent the software NeuronCore refuses instead of guessing (each with
rule `tensor-indirection` or `indirect-offset`): a data tensor with more than one free dimension,
an offset i whose index row or column lies outside the index tensor (for example the default
num_elem = index.size when the data has more than one partition group), an offset outside the
free dimension, and two equal offsets of one group in a scatter (their write order is undefined).
The offsets are read when the instruction runs, as the engine reads them.
"""

from __future__ import annotations

import contextlib
import threading

import torch

from . import dtypes as dt
from . import tensor
from .errors import NkiValidationError, describe
from .isa_common import require_arch
from .tensor import NkiTensor

RULE = "tensor-indirection"
ENGINE_GROUP = 16  # partitions sharing offsets on the Vector, Scalar and GpSimd Engines
TENSOR_ENGINE_GROUP = 32  # ... and on the Tensor Engine

_engine = threading.local()


@contextlib.contextmanager
def tensor_engine_operands():
    """Inside it, indirect views group partitions as the Tensor Engine does (32 at a time)."""
    previous = getattr(_engine, "group", ENGINE_GROUP)
    _engine.group = TENSOR_ENGINE_GROUP
    try:
        yield
    finally:
        _engine.group = previous


def _group() -> int:
    return getattr(_engine, "group", ENGINE_GROUP)


def _fail(message: str) -> None:
    raise NkiValidationError(RULE, message)


class TensorIndirectView(NkiTensor):
    """Columns of a 2-D on-chip tensor at offsets read from an index tensor when used."""

    __slots__ = ("source", "index")

    def __init__(self, source: NkiTensor, index: NkiTensor, num_elem: int):
        super().__init__(source.storage, (source.shape[0], num_elem), source.strides,
                         source.offset, source.dtype, source.name)
        self.source = source  # the data view: its free dimension bounds the offsets
        self.index = index

    def is_indirect(self) -> bool:
        return True

    def strided_view(self, *args, **kwargs):
        raise NkiValidationError(RULE, f"{describe(self)}: a tensor-indirection view cannot be "
                                 "sliced or viewed again; index the data tensor before "
                                 ".indirect()")

    def offsets(self, instr: str) -> torch.Tensor:
        """(P, num_elem) free-dimension offset of each element, checked against both tensors."""
        P, n = self.shape
        G = _group()
        K = self.index.shape[1]
        i = torch.arange(n)
        rows = (torch.arange(P) // G * G).reshape(P, 1) + (i % G).reshape(1, n)
        cols = (i // G).reshape(1, n).expand(P, n)
        outside = (rows >= P) | (cols >= K)
        if bool(outside.any()):
            p, j = (int(v) for v in outside.nonzero()[0])
            _fail(f"{instr}: offset {j} of partition {p} comes from index row {int(rows[p, j])}, "
                  f"column {int(cols[p, j])} (groups of {G} partitions, snake order), outside "
                  f"index {describe(self.index)}; give num_elem at most {G} * {K} with the data's "
                  f"partitions a whole number of {G}-partition groups")
        table = self.index.raw().to(torch.int64).reshape(P, K)
        offsets = table[rows, cols]
        F = self.source.shape[1]
        bad = (offsets >= F).nonzero()
        if len(bad):
            p, j = (int(v) for v in bad[0])
            raise NkiValidationError(
                "indirect-offset", f"{instr}: index {describe(self.index)} gives offset "
                f"{int(offsets[p, j])} (offset {j} of partition {p}) for the free dimension of "
                f"{describe(self.source)}, whose size is {F}; offsets must lie in 0..{F - 1}")
        return offsets

    def element_addresses(self, instr: str, offsets: torch.Tensor | None = None) -> torch.Tensor:
        """(P, num_elem) flat storage index of each element of the view."""
        offsets = self.offsets(instr) if offsets is None else offsets
        sp, sf = self.source.strides
        rows = torch.arange(self.shape[0]).reshape(-1, 1) * sp
        return self.source.offset + rows + offsets * sf

    def raw(self) -> torch.Tensor:
        address = self.element_addresses("tensor indirection (gather)")
        return self._storage.typed(self.dtype)[address]

    def write_raw(self, values: torch.Tensor, run) -> None:
        instr = "tensor indirection (scatter)"
        offsets = self.offsets(instr)
        G = _group()
        for start in range(0, self.shape[0], G):  # the partitions of a group share offsets
            if len(torch.unique(offsets[start])) != offsets.shape[1]:
                _fail(f"{instr}: index {describe(self.index)} repeats an offset of the "
                      f"partition group starting at partition {start}; a scatter writes each "
                      "column once (the order of repeated writes is undefined)")
        address = self.element_addresses(instr, offsets)
        self._storage.prepare_write(run)
        self._storage.typed(self.dtype)[address] = values.reshape(self.shape)
        self.mark_written(run, address)

    def write(self, values: torch.Tensor, run) -> None:
        self.write_raw(dt.from_float32(values, self.dtype).reshape(self.shape), run)

    def mark_written(self, run, address: torch.Tensor | None = None) -> None:
        """PSUM remembers the scattered elements as written (nc_matmul's accumulate=None)."""
        written = self._storage.written
        if written is not None and self.dtype.itemsize == self._storage.dtype.itemsize:
            if address is None:
                address = self.element_addresses("tensor indirection")
            written[address] = True
            self._storage.any_written = True

    def written_state(self):
        written = self.was_written()
        return True if bool(written.all()) else False if not bool(written.any()) else None

    def was_written(self) -> torch.Tensor:
        return self._storage.written[self.element_addresses("tensor indirection")]


def refuse_on_dma(instr: str, operands: dict) -> None:
    """Tensor indirection is how the compute engines address SBUF/PSUM; the DMA engines gather
    and scatter with indirect access patterns instead."""
    for role, t in operands.items():
        if isinstance(t, TensorIndirectView):
            _fail(f"{instr}: {role} {describe(t)} is a tensor-indirection view (.indirect()), "
                  "which the compute engines read and write; a DMA gathers or scatters through "
                  ".ap(vector_offset=...) or .vector_select()")


def indirect(t: NkiTensor, index, num_elem=None) -> NkiTensor:
    """The view `t.indirect(index, num_elem)` (rules above); offsets are read when it is used."""
    require_arch(f"{describe(t)}.indirect", "gen4")
    if not t.on_chip:
        _fail(f"{describe(t)}: tensor indirection addresses SBUF or PSUM tensors; HBM tensors "
              "use .ap(vector_offset=...) or .vector_select()")
    if t.is_indirect():
        _fail(f"{describe(t)}: already an indirect view; indirect views cannot be re-indirected")
    if t.ndim != 2:
        _fail(f"{describe(t)}: .indirect() needs a (partitions, free) tensor; offsets index one "
              "free dimension, so merge the free dimensions first (.flatten_dims)")
    if not isinstance(index, NkiTensor) or index.buffer.kind != "sbuf":
        _fail(f"{describe(t)}: the index of .indirect() must be an SBUF tensor, got "
              f"{describe(index) if isinstance(index, NkiTensor) else repr(index)}")
    if index.dtype is not dt.uint16:
        _fail(f"{describe(t)}: index {describe(index)} must be uint16 (tensor indirection "
              "offsets are 16-bit)")
    if index.ndim != 2 or index.shape[0] != t.shape[0]:
        _fail(f"{describe(t)}: index {describe(index)} must be ({t.shape[0]}, K): one row per "
              "partition of the data")
    count = index.size if num_elem is None else int(num_elem)
    if not 0 < count <= index.size:
        _fail(f"{describe(t)}: num_elem={num_elem} must be in 1..{index.size} (the offsets "
              f"index {describe(index)} holds)")
    return TensorIndirectView(t, index, count)


tensor.provide(indirect=indirect)
