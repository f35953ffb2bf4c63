"""Engine registers (nisa.register_alloc/move/load/store) and nl.dynamic_range: loops whose trip
count is a runtime value. While only shapes are traced (torch.compile's fake pass) a register
loaded from memory reads 0, so dynamic loops are skipped there."""

from __future__ import annotations

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


def _wrap32(value: int) -> int:
    return (int(value) + 2**31) % 2**32 - 2**31


def register_alloc(x=None) -> VirtualRegister:
    current()
    return VirtualRegister(0 if x is None else _wrap32(x))


def register_move(dst: VirtualRegister, src) -> None:
    current()
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


def _bound(instr: str, role: str, value) -> int:
    if isinstance(value, VirtualRegister):
        return value.value
    if isinstance(value, bool) or not isinstance(value, int):
        fail("register", f"{instr}: {role}={value!r} must be an int or a VirtualRegister")
    return value


def fori_loop(lower, upper, body_fun, step=1):
    """for i in range(lower, upper, step): body_fun(i), with i a fresh register each iteration
    (passed by value: writing it does not change the loop). Bounds may be registers; step is a
    compile-time positive integer (documented)."""
    I = "nl.fori_loop"
    current()
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        fail("register", f"{I}: step={step!r} must be a compile-time positive integer")
    if not callable(body_fun):
        fail("register", f"{I}: body_fun={body_fun!r} is not callable")
    for i in range(_bound(I, "lower", lower), _bound(I, "upper", upper), step):
        body_fun(VirtualRegister(i))


def while_loop(init, body_fun):
    """r = init; while r != 0: r = body_fun(r) (the condition is checked before each iteration;
    the body gets the condition by value and returns the next condition register)."""
    I = "nl.while_loop"
    current()
    if not isinstance(init, VirtualRegister):
        fail("register", f"{I}: init={init!r} must be a VirtualRegister (nisa.register_alloc)")
    if not callable(body_fun):
        fail("register", f"{I}: body_fun={body_fun!r} is not callable")
    r = init
    while r.value != 0:
        r = body_fun(VirtualRegister(r.value))
        if not isinstance(r, VirtualRegister):
            fail("register", f"{I}: body_fun returned {r!r}; it must return the next "
                 "condition as a VirtualRegister")
