"""NKI 0.8's device scalars: `nisa.NkiScalar`, `nisa.scalar_load`, `nisa.scalar_store` and
`nisa.scalar_alu` (with the Python operators on scalars), as AWS's nki.isa.NkiScalar,
scalar_load, scalar_store and scalar_alu pages (Neuron 2.34.0) describe them.

On the chip a scalar lives in an engine sequencer's register and its arithmetic is traced into
instructions; the interpreter runs the kernel as it traces, so a scalar holds its value here and
each operation computes it at once. Scalars are values (every operation makes a new one), so a
value read later, by a loop or an access pattern, is the value the scalar had when it was made.
While only shapes are traced (torch.compile's fake pass) a loaded scalar reads 0.

What the pages leave open is refused rather than guessed (rule ids in docs/nki.md): nl.int64
scalars (the software NeuronCore has no int64 tiles to load them from), a scalar used as a Python
bool or int, Python's `/`, `//` and `%` on scalars (the pages give no operator for divide/fmod),
integer division by zero, a Python int that does not fit the scalar's dtype, and arithmetic
between scalars bound to two different engines.
"""

from __future__ import annotations

import torch

from . import dtypes as dt
from . import ops
from .context import current
from .errors import NkiUnsupportedError, NkiValidationError, describe
from .isa_enums import engine as _engine
from .tensor import NkiTensor

ARITHMETIC = ("add", "subtract", "multiply", "divide", "fmod", "maximum", "minimum")
COMPARISON = ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal")
_DTYPES = (dt.int32, dt.uint32)  # the 32-bit scalars; both support every operation


def _fits(value: int, dtype) -> bool:
    return (0 <= value < 2**32) if dtype == dt.uint32 else (-2**31 <= value < 2**31)


def _wrap(value: int, dtype) -> int:
    """A 32-bit scalar is never widened: results wrap modulo 2**32 (documented)."""
    value %= 2**32
    return value if dtype == dt.uint32 or value < 2**31 else value - 2**32


def _truncating_divide(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _compute(name: str, a: int, b: int) -> int:
    """One operation on Python ints: divide rounds toward zero and fmod keeps data1's sign
    (-17 / 4 gives -4 remainder -1, as the page's example)."""
    if name == "divide":
        return _truncating_divide(a, b)
    if name == "fmod":
        return a - _truncating_divide(a, b) * b
    return {"add": a + b, "subtract": a - b, "multiply": a * b, "maximum": max(a, b),
            "minimum": min(a, b), "less": a < b, "less_equal": a <= b, "greater": a > b,
            "greater_equal": a >= b, "equal": a == b, "not_equal": a != b}[name]


def _engine_of(instr: str, engine):
    if engine is None or engine is _engine.unknown:
        return None
    if not isinstance(engine, _engine):
        raise NkiValidationError("scalar-engine", f"{instr}: engine={engine!r} is not a "
                                 "nisa.engine")
    return engine


class NkiScalar:
    """One 32-bit integer computed on the device (nl.int32 or nl.uint32), optionally bound to
    one engine's sequencer. Use it as an operand of scalar arithmetic, a scalar_offset, a
    fori_loop bound or a condition of nl.if_else / nl.while_loop; never as a Python bool or int
    (its value exists only when the kernel runs on the chip)."""

    __slots__ = ("value", "dtype", "engine")

    def __init__(self, state, dtype=None, engine=None):
        dtype = dt.int32 if dtype is None else dt.as_nki_dtype(dtype)
        if dtype not in _DTYPES:
            raise NkiUnsupportedError(
                f"nisa.NkiScalar: a {dtype} scalar is not supported; the software NeuronCore "
                "runs nl.int32 and nl.uint32 scalars (it has no nl.int64 tiles)")
        if isinstance(state, bool) or not isinstance(state, int):
            raise NkiValidationError("scalar-dtype", f"nisa.NkiScalar: state={state!r} must be "
                                     "an int")
        self.value = _wrap(state, dtype)
        self.dtype = dtype
        self.engine = _engine_of("nisa.NkiScalar", engine)

    def __repr__(self) -> str:
        bound = f", engine={self.engine.name}" if self.engine is not None else ""
        return f"NkiScalar({self.value}, {self.dtype}{bound})"

    def __bool__(self):
        raise NkiValidationError(
            "scalar-condition", f"{self!r} is a device scalar, computed when the kernel runs: "
            "it cannot be a Python if/while condition (nki.isa.scalar_alu); branch with "
            "nl.if_else(cond, then_fn, else_fn) or loop with nl.while_loop(init, body_fun)")

    def _not_an_int(self, *args):
        raise NkiValidationError(
            "scalar-condition", f"{self!r} is a device scalar, not a Python int: use it in "
            "scalar arithmetic, nisa.scalar_store, a fori_loop bound or an access pattern's "
            "scalar_offset, stride or count")

    __index__ = __int__ = __float__ = _not_an_int
    __hash__ = object.__hash__  # == makes a scalar, so hash by identity

    def _refused(self, *args):
        raise NkiUnsupportedError(
            "Python's /, // and % on an NkiScalar are not documented NKI operators (Python's "
            "// rounds down, NKI's divide toward zero): call nisa.scalar_alu(a, b, "
            "op=nl.divide) or op=nl.fmod")

    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _refused

    def __add__(self, other):
        return scalar_alu(self, other, op=ops.add)

    def __radd__(self, other):
        return scalar_alu(other, self, op=ops.add)

    def __sub__(self, other):
        return scalar_alu(self, other, op=ops.subtract)

    def __rsub__(self, other):
        return scalar_alu(other, self, op=ops.subtract)

    def __mul__(self, other):
        return scalar_alu(self, other, op=ops.multiply)

    def __rmul__(self, other):
        return scalar_alu(other, self, op=ops.multiply)

    def __neg__(self):
        return scalar_alu(0, self, op=ops.subtract)

    def __lt__(self, other):
        return scalar_alu(self, other, op=ops.less)

    def __le__(self, other):
        return scalar_alu(self, other, op=ops.less_equal)

    def __gt__(self, other):
        return scalar_alu(self, other, op=ops.greater)

    def __ge__(self, other):
        return scalar_alu(self, other, op=ops.greater_equal)

    def __eq__(self, other):
        return scalar_alu(self, other, op=ops.equal)

    def __ne__(self, other):
        return scalar_alu(self, other, op=ops.not_equal)


def _operand(instr: str, role: str, value, dtype):
    """(value, engine) of one operand; a Python int takes the other scalar's dtype."""
    if isinstance(value, NkiScalar):
        return value.value, value.engine
    if not _fits(value, dtype):
        raise NkiValidationError("scalar-dtype", f"{instr}: {role}={value} does not fit the "
                                 f"other operand's {dtype}")
    return _wrap(value, dtype), None


def scalar_alu(data1, data2, op, name=None):
    """data1 <op> data2 on device scalars (or at compile time when both are Python ints)."""
    I = "nisa.scalar_alu"
    for role, value in (("data1", data1), ("data2", data2)):
        if isinstance(value, bool) or not isinstance(value, (int, NkiScalar)):
            raise NkiValidationError("scalar-dtype", f"{I}: {role}={value!r} must be an "
                                     "NkiScalar or a Python int")
    opname = getattr(op, "name", None)
    if not isinstance(op, ops.Op) or opname not in ARITHMETIC + COMPARISON:
        raise NkiValidationError("scalar-op", f"{I}: op={op!r} is not a scalar operation; "
                                 f"arithmetic {', '.join('nl.' + n for n in ARITHMETIC)}, "
                                 f"comparisons {', '.join('nl.' + n for n in COMPARISON)}")
    if not isinstance(data1, NkiScalar) and not isinstance(data2, NkiScalar):
        if opname in ("divide", "fmod") and data2 == 0:
            raise NkiValidationError("scalar-op", f"{I}: nl.{opname} of {data1} by zero")
        return _compute(opname, data1, data2)  # folded at compile time: no instruction
    run = current()
    scalars = [s for s in (data1, data2) if isinstance(s, NkiScalar)]
    dtype = scalars[0].dtype
    if any(s.dtype != dtype for s in scalars):
        raise NkiValidationError("scalar-dtype", f"{I}: {data1!r} and {data2!r} differ in "
                                 "signedness; scalars must have the same width and signedness")
    a, engine_a = _operand(I, "data1", data1, dtype)
    b, engine_b = _operand(I, "data2", data2, dtype)
    if engine_a is not None and engine_b is not None and engine_a is not engine_b:
        raise NkiValidationError("scalar-engine", f"{I}: {data1!r} and {data2!r} are bound to "
                                 "different engines' sequencers")
    engine = engine_a or engine_b  # an unbound scalar is available on every engine
    if opname in ("divide", "fmod") and b == 0:
        if not run.computes:  # shapes only: loaded values are unknown (read as 0)
            return NkiScalar(0, dtype, engine)
        raise NkiValidationError("scalar-op", f"{I}: nl.{opname} of {data1!r} by zero; the "
                                 "pages do not say what the chip returns")
    result = _compute(opname, a, b)
    if opname in COMPARISON:
        return NkiScalar(int(result), dt.int32, engine)  # comparisons give nl.int32 0 or 1
    return NkiScalar(_wrap(result, dtype), dtype, engine)


def _one_element(instr: str, role: str, t) -> None:
    """The tile rules scalar_load and scalar_store share (documented on both pages)."""
    if not isinstance(t, NkiTensor):
        raise NkiValidationError("scalar-operand", f"{instr}: {role}={t!r} must be an NKI "
                                 "tensor")
    what = describe(t)
    if t.size != 1:
        raise NkiValidationError("scalar-operand", f"{instr}: {role} {what} must name exactly "
                                 "one element (a 1x1 tile or slice)")
    if t.buffer.kind == "psum":
        raise NkiValidationError("scalar-operand", f"{instr}: {role} {what} is in PSUM; "
                                 "scalars load from and store to SBUF or HBM (tensor_copy "
                                 "moves the value between PSUM and SBUF)")
    if t.storage.argument:
        raise NkiValidationError("scalar-operand", f"{instr}: {role} {what} is a kernel "
                                 "argument; dma_copy it into an internal tile first")
    if t.is_indirect():
        raise NkiValidationError("scalar-operand", f"{instr}: {role} {what} is an indirect "
                                 "view; scalars load from and store to a plain tile")
    if t.dtype not in _DTYPES:
        raise NkiValidationError("scalar-operand", f"{instr}: {role} {what} must be nl.int32 "
                                 "or nl.uint32 (nl.int64 tiles do not exist here)")


def scalar_load(src, engine=None) -> NkiScalar:
    """The value of a one-element int32/uint32 SBUF or HBM tile, as an NkiScalar of its dtype
    (bound to `engine`'s sequencer when one is named)."""
    I = "nisa.scalar_load"
    run = current()
    _one_element(I, "src", src)
    bound = _engine_of(I, engine)
    if not run.computes:
        return NkiScalar(0, src.dtype, bound)
    return NkiScalar(int(src.raw().reshape(-1)[0].to(torch.int64)), src.dtype, bound)


def scalar_store(dst, value, engine=None) -> None:
    """Writes `value` into a one-element tile of the same dtype. Without engine= the store runs
    on every sequencer, so a value bound to one sequencer is refused (documented)."""
    I = "nisa.scalar_store"
    run = current()
    if not isinstance(value, NkiScalar):
        raise NkiValidationError("scalar-operand", f"{I}: value={value!r} must be an "
                                 "NkiScalar (nisa.memset writes a compile-time constant)")
    _one_element(I, "dst", dst)
    if dst.dtype != value.dtype:
        raise NkiValidationError("scalar-dtype", f"{I}: dst {describe(dst)} must have the "
                                 f"scalar's dtype {value.dtype}")
    bound = _engine_of(I, engine)
    if bound is None and value.engine is not None:
        raise NkiValidationError("scalar-engine", f"{I}: {value!r} is bound to one sequencer "
                                 "and a store without engine= runs on every sequencer; pass "
                                 f"engine=nisa.engine.{value.engine.name}")
    if bound is not None and value.engine not in (None, bound):
        raise NkiValidationError("scalar-engine", f"{I}: {value!r} is not available on "
                                 f"engine {bound.name}")
    if run.computes:
        dst.write_raw(torch.tensor([value.value], dtype=torch.int64).to(dst.dtype.storage), run)
