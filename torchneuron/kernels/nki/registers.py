"""Engine registers (nisa.register_alloc/move/load/store, nisa.VirtualRegister) and
nl.dynamic_range: loops whose trip count is a runtime value. While only shapes are traced
(torch.compile's fake pass) a register loaded from memory reads 0, so dynamic loops are skipped
there. NKI 0.8 deprecates the register API for nisa.scalar_load/scalar_store and NkiScalar
(scalars.py): each call warns with a DeprecationWarning, as AWS's NKI 0.8 does. nl.fori_loop and
nl.while_loop, which also take registers, are in control_flow.py."""

from __future__ import annotations

import warnings

import torch

from . import dtypes as dt
from .context import current
from .errors import describe
from .rules import fail
from .tensor import NkiTensor


class VirtualRegister:
    """A 32-bit engine register holding an integer."""

    def __init__(self, value: int = 0, frozen: bool = False):
        self.value = int(value)
        self.frozen = frozen

    def __bool__(self) -> bool:
        return self.value != 0

    def __index__(self) -> int:
        return self.value

    def __int__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"VirtualRegister({self.value})"


def _deprecated(name: str) -> None:
    warnings.warn(f"nisa.{name} is deprecated in NKI 0.8; use nisa.scalar_load and "
                  "nisa.scalar_store with nisa.NkiScalar", DeprecationWarning, stacklevel=3)


def _wrap32(value: int) -> int:
    return (int(value) + 2**31) % 2**32 - 2**31


def register_alloc(x=None) -> VirtualRegister:
    current()
    _deprecated("register_alloc")
    return VirtualRegister(0 if x is None else _wrap32(x))


def register_move(dst: VirtualRegister, src) -> None:
    current()
    _deprecated("register_move")
    if dst.frozen:
        fail("register", "nisa.register_move: a dynamic_range induction variable is read-only")
    dst.value = src.value if isinstance(src, VirtualRegister) else _wrap32(src)


def _single(instr: str, t) -> None:
    if not isinstance(t, NkiTensor) or t.size != 1:
        fail("operand-shape", f"{instr}: the tensor must hold exactly one element, got "
             f"{describe(t) if isinstance(t, NkiTensor) else t!r}")
    if t.dtype.itemsize > 4:
        fail("operand-dtype", f"{instr}: registers hold 32 bits; {describe(t)} is wider")


def register_load(dst: VirtualRegister, src) -> None:
    run = current()
    _deprecated("register_load")
    _single("nisa.register_load", src)
    if dst.frozen:
        fail("register", "nisa.register_load: a dynamic_range induction variable is read-only")
    if not run.computes:
        dst.value = 0
        return
    raw = src.raw().reshape(-1)[0]
    dst.value = _wrap32(dt.to_float32(raw, src.dtype).item() if src.dtype.is_float
                        else int(raw.to(torch.int64).item()))


def register_store(dst, src: VirtualRegister) -> None:
    run = current()
    _deprecated("register_store")
    _single("nisa.register_store", dst)
    if run.computes:
        dst.write(torch.tensor([src.value], dtype=torch.int64), run)


def dynamic_range(start, stop=None, step=1):
    """A loop the hardware runs; its bounds may be registers. The simulator hands out the
    induction variable as a plain integer (on hardware it is a read-only register)."""
    current()
    if stop is None:
        start, stop = 0, start
    return range(int(start), int(stop), int(step))
