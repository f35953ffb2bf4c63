"""NKI's data types, how each is held in memory, and the casts between them.

Every engine computes in float32 and casts its float32 results to the destination's dtype (the
documented rule of the NKI ISA); `to_float32` and `from_float32` are those two casts. Where the
documentation is silent (float to integer), the cast rounds to nearest-even, saturates at the
integer range and turns NaN into 0, as Trainium's engines do for fp32-to-int conversions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .errors import NkiTypeError


@dataclass(frozen=True, eq=False)
class NkiDtype:
    name: str
    itemsize: int
    kind: str  # "float", "int", "uint" or "bool"
    storage: torch.dtype  # the torch dtype whose bits are this dtype's bits

    def __repr__(self) -> str:  # prints as the documentation shows it: "float16"
        return self.name

    __str__ = __repr__

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other) -> bool:
        if isinstance(other, NkiDtype):
            return other is self
        try:
            return as_nki_dtype(other) is self
        except NkiTypeError:
            return NotImplemented

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("int", "uint", "bool")


bool_ = NkiDtype("bool", 1, "bool", torch.uint8)  # "boolean stored as uint8"
int8 = NkiDtype("int8", 1, "int", torch.int8)
int16 = NkiDtype("int16", 2, "int", torch.int16)
int32 = NkiDtype("int32", 4, "int", torch.int32)
uint8 = NkiDtype("uint8", 1, "uint", torch.uint8)
uint16 = NkiDtype("uint16", 2, "uint", torch.uint16)
uint32 = NkiDtype("uint32", 4, "uint", torch.uint32)
float16 = NkiDtype("float16", 2, "float", torch.float16)
bfloat16 = NkiDtype("bfloat16", 2, "float", torch.bfloat16)
float32 = NkiDtype("float32", 4, "float", torch.float32)
tfloat32 = NkiDtype("tfloat32", 4, "float", torch.float32)  # float32 bits, 10-bit mantissa
float8_e4m3 = NkiDtype("float8_e4m3", 1, "float", torch.uint8)  # IEEE-style, max 240, has inf
float8_e5m2 = NkiDtype("float8_e5m2", 1, "float", torch.float8_e5m2)
float8_e4m3fn = NkiDtype("float8_e4m3fn", 1, "float", torch.float8_e4m3fn)  # OCP, NeuronCore-v4

ALL = (bool_, int8, int16, int32, uint8, uint16, uint32, float16, bfloat16, float32, tfloat32,
       float8_e4m3, float8_e5m2, float8_e4m3fn)
BY_NAME = {d.name: d for d in ALL} | {"bool_": bool_}

# The 4-packed MX types exist in NKI only for nc_matmul_mx/quantize_mx on NeuronCore-v4.
UNSUPPORTED = ("float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4", "float8_e8m0fnu")

_FROM_TORCH = {torch.bool: bool_, torch.int8: int8, torch.int16: int16, torch.int32: int32,
               torch.uint8: uint8, torch.uint16: uint16, torch.uint32: uint32,
               torch.float16: float16, torch.bfloat16: bfloat16, torch.float32: float32,
               torch.float8_e5m2: float8_e5m2, torch.float8_e4m3fn: float8_e4m3fn}
_TORCH_OF = {bool_: torch.bool, float8_e4m3: None, tfloat32: torch.float32}

_NO_TRAINIUM_TYPE = ("float64", "int64", "uint64", "complex64", "complex128", "float8_e4m3fnuz",
                     "float8_e5m2fnuz")


def as_nki_dtype(value) -> NkiDtype:
    """The NKI dtype for an nl dtype, a torch dtype, a numpy dtype or a dtype's name."""
    if isinstance(value, NkiDtype):
        return value
    if isinstance(value, torch.dtype):
        if value in _FROM_TORCH:
            return _FROM_TORCH[value]
        name = str(value).removeprefix("torch.")
    elif isinstance(value, str):
        name = value
    else:
        try:
            name = np.dtype(value).name
        except TypeError:
            raise NkiTypeError(f"{value!r} is not a dtype") from None
    if name in BY_NAME:
        return BY_NAME[name]
    if name in UNSUPPORTED:
        raise NkiTypeError(f"dtype {name} (MX-format data or scales for nc_matmul_mx and "
                           "quantize_mx on NeuronCore-v4) is not supported by the software "
                           "NeuronCore's NKI")
    if name in _NO_TRAINIUM_TYPE:
        raise NkiTypeError(f"dtype {name} is not an NKI data type: Trainium's engines have no "
                           f"{name} (supported: {', '.join(d.name for d in ALL)})")
    raise NkiTypeError(f"dtype {name!r} is not an NKI data type (supported: "
                       f"{', '.join(d.name for d in ALL)})")


def torch_dtype_of(dtype: NkiDtype) -> torch.dtype:
    """The torch dtype a kernel's HBM result of this dtype comes back as."""
    if dtype is float8_e4m3:
        raise NkiTypeError("float8_e4m3 (IEEE-style, max 240) has no torch dtype; a kernel can use "
                           "it on chip but cannot return it (use float8_e4m3fn or float8_e5m2)")
    return _TORCH_OF.get(dtype, dtype.storage)


def promote(a: NkiDtype, b: NkiDtype) -> NkiDtype:
    """NKI's documented type promotion for arithmetic between two dtypes."""
    if a is b:
        return a
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a.is_float:
        widths = {float8_e4m3: 1, float8_e4m3fn: 1, float8_e5m2: 1, float16: 2, bfloat16: 2,
                  tfloat32: 3, float32: 4}
        if widths[a] == widths[b]:  # (f16, bf16) -> f32; two fp8 formats -> bf16
            return float32 if widths[a] == 2 else bfloat16
        return a if widths[a] > widths[b] else b
    if bool_ in (a, b):
        return b if a is bool_ else a
    if a.kind == b.kind:
        return a if a.itemsize >= b.itemsize else b
    signed, unsigned = (a, b) if a.kind == "int" else (b, a)
    if signed.itemsize > unsigned.itemsize:
        return signed
    return {1: int16, 2: int32}.get(unsigned.itemsize, float32)  # int64 does not exist on chip


def float32_constant(value) -> float:
    """A Python number as the float32 an engine holds: kernels write float32's extremes in
    decimal (-3.4028235e38 for its lowest, used as minus infinity), which as a double lies just
    beyond float32's range, so torch refuses it as an overflow; float32 rounds it to the extreme."""
    return float(np.float32(value))


def scalar_dtype(value) -> NkiDtype:
    """Weakly typed scalars are inferred as the widest hardware type (documented)."""
    if isinstance(value, (bool, np.bool_)):
        return uint8
    if isinstance(value, (int, np.integer)):
        return int32
    return float32


# ---- casts -------------------------------------------------------------------------------------

def _e4m3_table() -> torch.Tensor:
    codes = torch.arange(256, dtype=torch.int32)
    sign = torch.where(codes >= 128, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = (codes & 0x7).float()
    normal = (1.0 + man / 8.0) * torch.pow(2.0, exp.float() - 7.0)
    sub = (man / 8.0) * 2.0 ** -6
    value = torch.where(exp == 0, sub, normal)
    value = torch.where((exp == 15) & (man == 0), torch.tensor(float("inf")), value)
    value = torch.where((exp == 15) & (man != 0), torch.tensor(float("nan")), value)
    return (sign * value).float()


_E4M3_VALUES = _e4m3_table()
_E4M3_POSITIVE = _E4M3_VALUES[:120]  # codes 0..119: 0 up to 240, increasing
_E4M3_MAX = 240.0
_E4M3_OVERFLOW = 248.0  # halfway between 240 and the next binade's 256: rounds to inf


def _encode_e4m3(x: torch.Tensor) -> torch.Tensor:
    a = x.abs()
    hi = torch.searchsorted(_E4M3_POSITIVE, a.clamp(max=_E4M3_MAX).contiguous()).clamp(max=119)
    lo = (hi - 1).clamp(min=0)
    d_hi = (_E4M3_POSITIVE[hi] - a).abs()
    d_lo = (a - _E4M3_POSITIVE[lo]).abs()
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = torch.where(pick_hi, hi, lo)
    code = torch.where(a >= _E4M3_OVERFLOW, torch.tensor(120), code)  # inf
    code = torch.where(torch.isnan(x), torch.tensor(127), code)
    code = code + torch.where(torch.signbit(x), 128, 0)
    return code.to(torch.uint8)


def _round_tf32(x: torch.Tensor) -> torch.Tensor:
    bits = x.contiguous().view(torch.int32)
    lsb = (bits >> 13) & 1
    rounded = (bits + 0xFFF + lsb) & ~0x1FFF
    finite = torch.isfinite(x)
    return torch.where(finite, rounded.view(torch.float32), x)


def to_float32(raw: torch.Tensor, dtype: NkiDtype) -> torch.Tensor:
    """The float32 values of memory holding `dtype` (what an engine reads)."""
    if dtype is float8_e4m3:
        return _E4M3_VALUES[raw.to(torch.int64)]
    return raw.to(torch.float32)


def to_int64(raw: torch.Tensor, dtype: NkiDtype) -> torch.Tensor:
    return raw.to(torch.int64)


def from_float32(values: torch.Tensor, dtype: NkiDtype) -> torch.Tensor:
    """Memory contents of `dtype` for float32 (or exact integer) values: the engines' output cast."""
    if dtype.is_float:
        values = values.to(torch.float32)
        if dtype is float8_e4m3:
            return _encode_e4m3(values)
        if dtype is tfloat32:
            return _round_tf32(values)
        return values.to(dtype.storage)
    if dtype is bool_:
        return (values != 0).to(torch.uint8)
    info = torch.iinfo(dtype.storage)
    if values.is_floating_point():
        values = torch.nan_to_num(values.to(torch.float64), nan=0.0).round()
    values = values.to(torch.float64).clamp(info.min, info.max)
    return values.to(torch.int64).to(dtype.storage)
