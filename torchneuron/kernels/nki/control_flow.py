"""NKI's control flow on values computed on the device: nl.fori_loop, nl.while_loop and
nl.if_else, as AWS's pages for Neuron 2.34.0 (NKI 0.8) describe them.

Conditions and bounds are NkiScalars (scalars.py) or compile-time Python ints; a Python bool or
int is resolved at once, as on the chip. NKI 0.8 deprecates VirtualRegister but keeps it, so a
register bound of fori_loop or a register init of while_loop keeps NKI 0.7's behaviour (the body
gets a register and while_loop's body returns one).

Every sequencer runs a branch or a loop, so a condition or bound bound to one engine's sequencer
is refused (documented for if_else and while_loop; fori_loop's page does not say, so it is
refused there too rather than guessed). While only shapes are traced (torch.compile's fake pass)
loaded scalars read 0, so data-dependent loops run no iteration and if_else takes else_fn there.
"""

from __future__ import annotations

from . import dtypes as dt
from .context import current
from .errors import NkiValidationError
from .registers import VirtualRegister
from .scalars import NkiScalar


def _fail(message: str):
    raise NkiValidationError("control-flow", message)


def _callable(instr: str, role: str, fn) -> None:
    if not callable(fn):
        _fail(f"{instr}: {role}={fn!r} is not callable")


def _signed32(instr: str, role: str, value, allow_unsigned: bool = False) -> int:
    """A condition or bound's value: a Python int, or an NkiScalar of 32 bits available on every
    engine."""
    if isinstance(value, NkiScalar):
        if value.engine is not None:
            _fail(f"{instr}: {role}={value!r} is bound to one sequencer; every sequencer runs "
                  "the control flow, so the value must be available on all engines")
        if value.dtype != dt.int32 and not allow_unsigned:
            _fail(f"{instr}: {role}={value!r} must be a signed 32-bit (nl.int32) scalar; "
                  "compare an unsigned value with zero (value != 0) for an nl.int32 one")
        return value.value
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(f"{instr}: {role}={value!r} must be an int or an nl.int32 NkiScalar")
    return value


def fori_loop(lower, upper, body_fun, step=1, unroll=None):
    """for i in range(lower, upper, step): body_fun(i). i is a fresh int32 NkiScalar each
    iteration (a VirtualRegister when a bound is one), passed by value. step is a compile-time
    positive integer; unroll (None, False or True) only chooses how the compiler lays the loop
    out, which does not change what it computes."""
    I = "nl.fori_loop"
    current()
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        _fail(f"{I}: step={step!r} must be a compile-time positive integer")
    if unroll not in (None, False, True):
        _fail(f"{I}: unroll={unroll!r} must be None, False or True")
    _callable(I, "body_fun", body_fun)
    registers = isinstance(lower, VirtualRegister) or isinstance(upper, VirtualRegister)
    if unroll is True and any(isinstance(b, (VirtualRegister, NkiScalar)) for b in (lower, upper)):
        _fail(f"{I}: unroll=True unrolls at compile time, so its bounds must be compile-time "
              "ints")
    bounds = [b.value if isinstance(b, VirtualRegister) else _signed32(I, role, b)
              for role, b in (("lower", lower), ("upper", upper))]
    for i in range(bounds[0], bounds[1], step):
        body_fun(VirtualRegister(i) if registers else NkiScalar(i, dt.int32))


def while_loop(init, body_fun):
    """r = init; while r != 0: r = body_fun(r). The condition is checked before each iteration;
    the body gets it as an NkiScalar (by value) and returns the next one, an nl.int32 NkiScalar
    (a comparison, r - 1, ...) or an int. A VirtualRegister init keeps NKI 0.7's register loop."""
    I = "nl.while_loop"
    current()
    _callable(I, "body_fun", body_fun)
    if isinstance(init, VirtualRegister):
        r = init
        while r.value != 0:
            r = body_fun(VirtualRegister(r.value))
            if not isinstance(r, VirtualRegister):
                _fail(f"{I}: body_fun returned {r!r}; a loop started from a VirtualRegister "
                      "continues with the next condition as a VirtualRegister")
        return
    value = _signed32(I, "init", init)
    while value != 0:
        nxt = body_fun(NkiScalar(value, dt.int32))
        if nxt is None:
            _fail(f"{I}: body_fun returned None; it must return the next condition (an "
                  "nl.int32 NkiScalar or an int)")
        value = _signed32(I, "the condition body_fun returned", nxt)


def if_else(cond, then_fn, else_fn=None):
    """Runs then_fn() when cond is nonzero (a negative value too), else else_fn() if given. A
    Python bool or int is resolved at compile time; a device condition is a 32-bit NkiScalar
    available on all engines. The callbacks take no arguments and return nothing."""
    I = "nl.if_else"
    current()
    _callable(I, "then_fn", then_fn)
    if else_fn is not None:
        _callable(I, "else_fn", else_fn)
    if isinstance(cond, bool):
        taken = cond
    else:
        taken = _signed32(I, "cond", cond, allow_unsigned=True) != 0
    branch = then_fn if taken else else_fn
    if branch is not None and branch() is not None:
        _fail(f"{I}: {'then_fn' if taken else 'else_fn'} returned a value; the callbacks "
              "return nothing (carry results through SBUF or HBM)")
