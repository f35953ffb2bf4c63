"""nki.language's tensor creation: nl.ndarray (with address= placement), zeros, ones, full and
their _like forms, empty_like, shared_constant, shared_identity_matrix, rand and random_seed.
Each allocates in the kernel run (context.py), which checks the memories' capacity rules."""

from __future__ import annotations

import torch

from . import dtypes as dt
from .buffers import as_buffer, sbuf, shared_hbm
from .context import current
from .dtypes import float32, uint8
from .tensor import NkiTensor


def as_shape(shape) -> tuple:
    """A shape argument (an int or a sequence of ints) as a tuple."""
    return (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)


def ndarray(shape, dtype, buffer=None, name="", address=None):
    """A new tensor; `address=(partition_offset, free_offset_in_bytes)` places an on-chip tensor
    explicitly (tensors placed at one address share memory, as on the chip)."""
    run = current()
    dtype, buffer = dt.as_nki_dtype(dtype), as_buffer(buffer)
    return NkiTensor.whole(run.allocate(as_shape(shape), dtype, buffer, name, address))


def shared_constant(constant, dtype=None):
    """A shared-HBM tensor holding `constant` (a numpy array, a tensor or the path of a .npy
    file), as the compiler embeds it in the binary."""
    if isinstance(constant, (str, bytes)) or hasattr(constant, "__fspath__"):
        import numpy as np
        constant = np.load(constant)
    values = torch.as_tensor(constant)
    if dtype is None:
        dtype = values.dtype
    dtype = dt.as_nki_dtype(dtype)
    t = ndarray(tuple(values.shape) or (1,), dtype, shared_hbm, "shared_constant")
    run = current()
    if run.computes:
        t.write(values.reshape(-1) if values.is_floating_point() or dtype.is_float
                else values.to(torch.int64).reshape(-1), run)
    return t


def _filled(shape, value, dtype, buffer, name):
    t = ndarray(shape, dtype, buffer, name)
    run = current()
    run.instructions[0] += 1  # a memset
    if run.computes:
        exact = isinstance(value, int) and t.dtype.is_integer
        t.write(torch.full((t.size,), value) if exact else
                torch.full((t.size,), dt.float32_constant(value)), run)
    return t


def zeros(shape, dtype, buffer=None, name=""):
    return _filled(shape, 0, dtype, buffer, name)


def ones(shape, dtype, buffer=None, name=""):
    return _filled(shape, 1, dtype, buffer, name)


def full(shape, fill_value, dtype, buffer=None, name=""):
    return _filled(shape, fill_value, dtype, buffer, name)


def zeros_like(a, dtype=None, buffer=None, name=""):
    return zeros(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def ones_like(a, dtype=None, buffer=None, name=""):
    return ones(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def empty_like(a, dtype=None, buffer=None, name=""):
    return ndarray(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def shared_identity_matrix(n, dtype=uint8):
    t = zeros((n, n), dtype, sbuf, "identity")
    run = current()
    if run.computes:
        t.write(torch.eye(n), run)
    return t


def rand(shape, dtype=float32, buffer=None, name=""):
    t = ndarray(shape, dtype, buffer, name)
    run = current()
    if run.computes:
        t.write(torch.rand(t.size, generator=run.generator), run)
    return t


def random_seed(seed):
    current().generator.manual_seed(int(seed if not isinstance(seed, NkiTensor)
                                         else seed.read_f32().reshape(-1)[0]))
