"""The NeuronCore's memories (nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm) and the storage behind a
tensor.

A Storage is one allocation: a flat torch tensor of the allocation's dtype (on the CPU for SBUF
and PSUM; for HBM the CPU alias of neuron memory, or meta memory while only shapes are traced).
Tensors are views on a Storage. Kernel arguments are written copy-on-write (`prepare_write`): the
run commits the copies when the kernel returns, so a kernel that fails leaves its arguments as
they were.
"""

from __future__ import annotations

import torch

from . import dtypes as dt


class Buffer:
    """A memory kind as NKI names it; `t.buffer == nl.sbuf` compares these."""

    def __init__(self, name: str, kind: str):
        self.name = name
        self.kind = kind  # "sbuf", "psum" or "hbm"

    def __repr__(self) -> str:
        return self.name

    @property
    def on_chip(self) -> bool:
        return self.kind in ("sbuf", "psum")


sbuf = Buffer("sbuf", "sbuf")
psum = Buffer("psum", "psum")
private_hbm = Buffer("private_hbm", "hbm")
hbm = private_hbm  # documented: "HBM - Alias of private_hbm"
shared_hbm = Buffer("shared_hbm", "hbm")

BUFFERS = {"sbuf": sbuf, "psum": psum, "hbm": hbm, "private_hbm": private_hbm,
           "shared_hbm": shared_hbm}


def as_buffer(value) -> Buffer:
    if value is None:
        return sbuf  # nl.ndarray's documented default
    if isinstance(value, Buffer):
        return value
    if isinstance(value, str) and value in BUFFERS:
        return BUFFERS[value]
    raise TypeError(f"buffer={value!r} is not an NKI memory; use nl.sbuf, nl.psum, nl.hbm, "
                    "nl.private_hbm or nl.shared_hbm")


class Storage:
    """One allocation. `data` is flat, of `dtype.storage`; tensors index it with strides."""

    __slots__ = ("buffer", "data", "dtype", "shape", "name", "written", "argument", "original",
                 "pitch", "base", "any_written", "all_written", "__weakref__")

    def __init__(self, buffer: Buffer, data: torch.Tensor, dtype: dt.NkiDtype, shape, name: str,
                 argument: bool = False, pitch: int | None = None, base: int = 0,
                 written: torch.Tensor | None = None):
        self.buffer = buffer
        self.data = data
        self.dtype = dtype
        self.shape = tuple(shape)
        self.name = name
        self.argument = argument  # a kernel argument: written copy-on-write
        self.original = None  # the argument's own memory while `data` is its copy
        # An explicitly placed tensor is a window of its memory's image: `data` is the whole
        # image, `pitch` the elements of one partition there, `base` where the tensor starts.
        self.pitch = pitch
        self.base = base
        # PSUM remembers which elements were written, for nc_matmul's accumulate=None.
        if written is None and buffer.kind == "psum":
            written = torch.zeros(data.numel(), dtype=torch.bool, device=data.device)
        self.written = written
        # Summaries of `written` for an allocation of its own (pitch None), so nc_matmul's
        # accumulate=None skips reading the mask in the common cases: nothing written yet (the
        # first matmul of a group) or everything written (the rest of it).
        self.any_written = False
        self.all_written = False

    @property
    def partition_stride(self) -> int:
        """Elements between two partitions of an on-chip allocation (its free size, or the
        memory's partition size for an explicitly placed tensor)."""
        if self.pitch is not None:
            return self.pitch
        n = 1
        for s in self.shape[1:]:
            n *= s
        return n

    @property
    def free_size(self) -> int:
        """Elements per partition of the allocation as the kernel declared it."""
        n = 1
        for s in self.shape[1:]:
            n *= s
        return n

    def locate(self, offset: int) -> int:
        """The storage offset of the tensor's element `offset` (row-major in its declared shape):
        what an access pattern's offset means."""
        if self.pitch is None:
            return offset
        free = self.free_size
        return self.base + (offset // free) * self.pitch + offset % free

    def typed(self, dtype: dt.NkiDtype) -> torch.Tensor:
        """The flat memory as `dtype`'s storage type (a bit reinterpretation)."""
        if dtype.storage == self.data.dtype:
            return self.data
        return self.data.view(torch.uint8).view(dtype.storage)

    def prepare_write(self, run) -> None:
        if self.argument and self.original is None:
            self.original = self.data
            self.data = self.data.clone()
            run.staged.append(self)

    def commit(self) -> None:
        if self.original is not None:
            self.original.copy_(self.data)
            self.data = self.original
            self.original = None
