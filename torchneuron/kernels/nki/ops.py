"""NKI's math operators and activation functions as objects.

One object serves both roles NKI gives it: `nl.add` is the `op=` of an ISA instruction
(nisa.tensor_tensor(..., op=nl.add)) and the high-level function nl.add(x, y) that returns a new
tile. Each knows its float32 math, whether it is a bitvec or arithmetic operator, and whether it
may reduce (the "Supported Math Operators for NKI ISA" table).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .errors import NkiTypeError


class Op:
    def __init__(self, name: str, *, binary=None, unary=None, kind: str = "arith",
                 reduce=None, activation: bool = False, compare: bool = False):
        self.name = name
        self.binary = binary  # (a, b) -> float32 or int64 tensor
        self.unary = unary  # a -> tensor
        self.kind = kind  # "arith" or "bitvec"
        self.reduce = reduce  # (tensor, dims) -> tensor, for reducible operators
        self.activation = activation  # allowed as nisa.activation's op
        self.compare = compare
        self.function = None  # the high-level nl function, set by high_level_ops.py

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __call__(self, *args, **kwargs):
        if self.function is None:
            raise NkiTypeError(f"nl.{self.name} is an operator for nki.isa instructions only")
        return self.function(*args, **kwargs)


def _f(fn):
    return lambda a, b: fn(a, b)


def _gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


def _gelu_dx(x):
    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
    pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return cdf + x * pdf


def _silu_dx(x):
    s = torch.sigmoid(x)
    return s * (1 + x * (1 - s))


def _gelu_sigmoid_dx(x):
    """d/dx of x * sigmoid(1.702 x)."""
    s = torch.sigmoid(1.702 * x)
    return s + 1.702 * x * s * (1 - s)


def _fold_subtract(x, dims):
    first = x.narrow(dims[0], 0, 1) if len(dims) == 1 else None
    if first is None:
        flat = x.flatten(dims[0])
        return flat[..., 0] - flat[..., 1:].sum(-1)
    return (first - x.narrow(dims[0], 1, x.shape[dims[0]] - 1).sum(dims[0], keepdim=True)
            ).squeeze(dims[0])


def _amax(x, dims):
    return x.amax(dim=dims)


def _amin(x, dims):
    return x.amin(dim=dims)


def _bits(fn):
    return lambda a, b: fn(a.to(torch.int64), b.to(torch.int64))


def _bit_reduce(fn):
    def reduce(x, dims):
        x = x.to(torch.int64).flatten(dims[0])
        out = x[..., 0]
        for i in range(1, x.shape[-1]):
            out = fn(out, x[..., i])
        return out
    return reduce


def _logic(fn):
    return lambda a, b: fn(a != 0, b != 0).to(torch.float32)


add = Op("add", binary=torch.add, reduce=lambda x, d: x.sum(dim=d))
subtract = Op("subtract", binary=torch.sub, reduce=_fold_subtract)
multiply = Op("multiply", binary=torch.mul, reduce=lambda x, d: x.prod(dim=d) if len(d) == 1
              else x.flatten(d[0]).prod(-1))
divide = Op("divide", binary=torch.div)
maximum = Op("maximum", binary=torch.maximum, reduce=_amax)
minimum = Op("minimum", binary=torch.minimum, reduce=_amin)
power = Op("power", binary=torch.pow)
fmod = Op("fmod", binary=torch.fmod)
equal = Op("equal", binary=lambda a, b: (a == b).to(torch.float32), compare=True)
not_equal = Op("not_equal", binary=lambda a, b: (a != b).to(torch.float32), compare=True)
greater = Op("greater", binary=lambda a, b: (a > b).to(torch.float32), compare=True)
greater_equal = Op("greater_equal", binary=lambda a, b: (a >= b).to(torch.float32), compare=True)
less = Op("less", binary=lambda a, b: (a < b).to(torch.float32), compare=True)
less_equal = Op("less_equal", binary=lambda a, b: (a <= b).to(torch.float32), compare=True)
logical_and = Op("logical_and", binary=_logic(torch.logical_and),
                 reduce=lambda x, d: (x != 0).flatten(d[0]).all(-1).to(torch.float32))
logical_or = Op("logical_or", binary=_logic(torch.logical_or),
                reduce=lambda x, d: (x != 0).flatten(d[0]).any(-1).to(torch.float32))
logical_xor = Op("logical_xor", binary=_logic(torch.logical_xor),
                 reduce=lambda x, d: ((x != 0).flatten(d[0]).sum(-1) % 2).to(torch.float32))
bitwise_and = Op("bitwise_and", binary=_bits(torch.bitwise_and), kind="bitvec",
                 reduce=_bit_reduce(torch.bitwise_and))
bitwise_or = Op("bitwise_or", binary=_bits(torch.bitwise_or), kind="bitvec",
                reduce=_bit_reduce(torch.bitwise_or))
bitwise_xor = Op("bitwise_xor", binary=_bits(torch.bitwise_xor), kind="bitvec",
                 reduce=_bit_reduce(torch.bitwise_xor))
left_shift = Op("left_shift", binary=_bits(torch.bitwise_left_shift), kind="bitvec")
right_shift = Op("right_shift", binary=_bits(lambda a, b: torch.bitwise_right_shift(
    a & 0xFFFFFFFF, b)), kind="bitvec")  # logical shift: the 32-bit pattern, zero-filled
invert = Op("invert", unary=lambda a: torch.bitwise_not(a.to(torch.int64)), kind="bitvec")

# Unary functions: ALU operators (tensor_scalar with operand 0/None) and activation functions.
abs = Op("abs", unary=torch.abs, activation=True)
rsqrt = Op("rsqrt", unary=torch.rsqrt, activation=True)
reciprocal = Op("reciprocal", unary=torch.reciprocal, activation=True)
copy = Op("copy", unary=lambda x: x, activation=True)
square = Op("square", unary=torch.square, activation=True)
sigmoid = Op("sigmoid", unary=torch.sigmoid, activation=True)
relu = Op("relu", unary=torch.relu, activation=True)
gelu = Op("gelu", unary=torch.nn.functional.gelu, activation=True)
gelu_dx = Op("gelu_dx", unary=_gelu_dx, activation=True)
gelu_apprx_tanh = Op("gelu_apprx_tanh", unary=_gelu_tanh, activation=True)
gelu_apprx_sigmoid = Op("gelu_apprx_sigmoid", unary=lambda x: x * torch.sigmoid(1.702 * x),
                        activation=True)
silu = Op("silu", unary=torch.nn.functional.silu, activation=True)
silu_dx = Op("silu_dx", unary=_silu_dx, activation=True)
tanh = Op("tanh", unary=torch.tanh, activation=True)
softplus = Op("softplus", unary=torch.nn.functional.softplus, activation=True)
mish = Op("mish", unary=torch.nn.functional.mish, activation=True)
erf = Op("erf", unary=torch.erf, activation=True)
erf_dx = Op("erf_dx", unary=lambda x: 2.0 / math.sqrt(math.pi) * torch.exp(-x * x),
            activation=True)
exp = Op("exp", unary=torch.exp, activation=True)
log = Op("log", unary=torch.log, activation=True)
sin = Op("sin", unary=torch.sin, activation=True)
cos = Op("cos", unary=torch.cos, activation=True)
arctan = Op("arctan", unary=torch.atan, activation=True)
sqrt = Op("sqrt", unary=torch.sqrt, activation=True)
sign = Op("sign", unary=torch.sign, activation=True)
negative = Op("negative", unary=torch.neg)
tan = Op("tan", unary=torch.tan, activation=True)
trunc = Op("trunc", unary=torch.trunc)
logical_not = Op("logical_not", unary=lambda x: (x == 0).to(x.dtype))
gelu_apprx_sigmoid_dx = Op("gelu_apprx_sigmoid_dx", unary=lambda x: _gelu_sigmoid_dx(x),
                           activation=True)
floor = Op("floor", unary=torch.floor)
ceil = Op("ceil", unary=torch.ceil)

abs_max = Op("abs_max", binary=lambda a, b: torch.maximum(a.abs(), b.abs()),
             reduce=lambda x, d: x.abs().amax(dim=d))
abs_min = Op("abs_min", binary=lambda a, b: torch.minimum(a.abs(), b.abs()),
             reduce=lambda x, d: x.abs().amin(dim=d))

# Operators of the newest reference (after 2.33). mod follows numpy.mod (the divisor's sign;
# fmod keeps the dividend's), average is the mean of its operands and reduces as a mean, bypass
# passes its data operand through (activate2's "no operation" stage and identity activation),
# prelu is activate2's parametric ReLU: its slope is activate2's relu_param, so it has no math
# of its own here.
mod = Op("mod", binary=torch.remainder)
average = Op("average", binary=lambda a, b: (a + b) * 0.5, reduce=lambda x, d: x.mean(dim=d))
bypass = Op("bypass", binary=lambda a, b: a, unary=lambda x: x, activation=True)
prelu = Op("prelu", activation=True)

BINARY = [add, subtract, multiply, divide, maximum, minimum, power, fmod, equal, not_equal,
          greater, greater_equal, less, less_equal, logical_and, logical_or, logical_xor,
          bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift, abs_max, abs_min, mod,
          average]
UNARY = [invert, abs, rsqrt, reciprocal, copy, square, sigmoid, relu, gelu, gelu_dx,
         gelu_apprx_tanh, gelu_apprx_sigmoid, silu, silu_dx, tanh, softplus, mish, erf, erf_dx,
         exp, log, sin, cos, arctan, sqrt, sign, negative, floor, ceil, tan, trunc, logical_not,
         gelu_apprx_sigmoid_dx, bypass]
BY_NAME = {o.name: o for o in BINARY + UNARY + [prelu]}
_NUMPY = {"add": add, "subtract": subtract, "multiply": multiply, "divide": divide,
          "true_divide": divide, "maximum": maximum, "minimum": minimum, "power": power,
          "equal": equal, "not_equal": not_equal, "greater": greater,
          "greater_equal": greater_equal, "less": less, "less_equal": less_equal,
          "exp": exp, "log": log, "tanh": tanh, "sqrt": sqrt, "abs": abs, "absolute": abs,
          "sin": sin, "cos": cos, "arctan": arctan, "sign": sign, "negative": negative,
          "reciprocal": reciprocal, "square": square, "mod": mod, "remainder": mod,
          "fmod": fmod, "bitwise_and": bitwise_and,
          "bitwise_or": bitwise_or, "bitwise_xor": bitwise_xor, "invert": invert,
          "left_shift": left_shift, "right_shift": right_shift, "logical_and": logical_and,
          "logical_or": logical_or, "logical_xor": logical_xor}
REDUCTION_ALIASES: dict = {}  # nl.max -> maximum etc., filled by high_level_ops.py


def as_op(value, instr: str, role: str = "op") -> Op:
    """The operator for an `op=` argument: an nl operator (or nl.max/nl.sum for reductions) or
    the numpy ufunc of the same name, as NKI accepts."""
    if isinstance(value, Op):
        return value
    if value in REDUCTION_ALIASES:
        return REDUCTION_ALIASES[value]
    if isinstance(value, np.ufunc) and value.__name__ in _NUMPY:
        return _NUMPY[value.__name__]
    raise NkiTypeError(f"{instr}: {role}={value!r} is not an NKI operator (use nl.add, "
                       "nl.multiply, nl.maximum, nl.exp, ...)")
