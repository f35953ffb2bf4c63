"""The Trainium time of one kernel, estimated from a roofline: the kernel's FLOPs against the
profile's peak FLOP/s for its dtype, its bytes against HBM bandwidth, the larger of the two, plus
a fixed launch cost. Figures come from the profile table (runtime/profiles.py), per logical
NeuronCore. It is an estimate, not a measurement: see docs/profiler.md for what it ignores."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.utils.flop_counter import conv_flop_count, flop_registry

from ..runtime import config
from ..runtime.profiles import ChipProfile

aten = torch.ops.aten

# c10::toString names (what csrc/profiler records) -> torch dtypes.
_DTYPES = {"Float": torch.float32, "Double": torch.float64, "Half": torch.float16,
           "BFloat16": torch.bfloat16, "Long": torch.int64, "Int": torch.int32,
           "Short": torch.int16, "Char": torch.int8, "Byte": torch.uint8, "Bool": torch.bool,
           "ComplexFloat": torch.complex64, "ComplexDouble": torch.complex128,
           "Float8_e4m3fn": torch.float8_e4m3fn, "Float8_e5m2": torch.float8_e5m2}

# Reductions: one FLOP per input element.
_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "prod", "norm", "linalg_vector_norm",
               "var", "std", "var_mean", "std_mean", "logsumexp", "_softmax", "_log_softmax",
               "argmax", "argmin", "cumsum", "any", "all"}
# Data movement only: no arithmetic, bytes alone.
_MOVES = {"copy_", "_copy_from", "_copy_from_and_resize", "clone", "contiguous", "cat", "stack",
          "index_select", "gather", "scatter", "index", "index_put_", "_to_copy", "fill_",
          "zero_", "empty", "empty_strided", "as_strided", "view", "t", "transpose", "permute",
          "expand", "slice", "select", "embedding", "resize_", "set_", "_local_scalar_dense"}


@dataclass(frozen=True)
class Estimate:
    name: str
    flops: int
    bytes: int
    compute_s: float
    memory_s: float
    launch_s: float
    dtype: str  # the dtype whose peak FLOP/s was assumed

    @property
    def seconds(self) -> float:
        return max(self.compute_s, self.memory_s) + self.launch_s

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s > self.memory_s else "memory"


def _torch_dtype(name: str) -> torch.dtype | None:
    return _DTYPES.get(name)


def peak_flops(profile: ChipProfile, lnc: int, dtype: torch.dtype | None) -> float:
    """Peak dense FLOP/s of one logical NeuronCore for `dtype` (integers and others: FP32's)."""
    if dtype in (torch.bfloat16, torch.float16):
        chip = profile.peak_bf16_flops_per_chip
    elif dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        chip = profile.peak_fp8_flops_per_chip
    else:
        chip = profile.peak_fp32_flops_per_chip
    return profile.per_device(chip, lnc)


def hbm_bandwidth(profile: ChipProfile, lnc: int) -> float:
    return profile.per_device(profile.hbm_bandwidth_bytes_per_s, lnc)


def _nbytes(operands) -> int:
    total = 0
    for shape, dtype_name in operands:
        dtype = _torch_dtype(dtype_name)
        if dtype is None:  # a Python scalar: travels in the instruction, not through HBM
            continue
        total += math.prod(shape) * dtype.itemsize
    return total


def _meta(shape, dtype_name):
    return torch.empty(shape, dtype=_torch_dtype(dtype_name) or torch.float32, device="meta")


def count_flops(name: str, inputs, outputs) -> int:
    """FLOPs of one kernel: torch.utils.flop_counter's formula where it has one (matmuls,
    convolutions, attention), one per output element for pointwise ops, one per input element
    for reductions, none for data movement."""
    if name.startswith("compiled_graph"):
        # Its generated kernels are opaque from here: costed as its operands through HBM (what
        # a fused graph moves); its extern kernels (matmuls) are activities of their own.
        return 0
    op = name.split("::", 1)[-1].split(".", 1)[0]
    tensors = [(s, d) for s, d in inputs if _torch_dtype(d) is not None]
    packet = getattr(aten, op, None)
    out_shape = tuple(outputs[0][0]) if outputs else None
    if op in ("convolution", "convolution_overrideable", "_convolution") and len(tensors) >= 2:
        return int(conv_flop_count(tensors[0][0], tensors[1][0], out_shape, transposed=False))
    if packet is not None and packet in flop_registry and op in ("mm", "addmm", "bmm", "baddbmm"):
        args = [_meta(s, d) for s, d in tensors]
        out = _meta(out_shape, tensors[0][1]) if out_shape is not None else None
        return int(flop_registry[packet](*args, out_val=out))
    if op.rstrip("_") in _MOVES or op in _MOVES:
        return 0
    if op in _REDUCTIONS:
        return sum(math.prod(s) for s, _ in tensors[:1])
    return sum(math.prod(s) for s, d in outputs if _torch_dtype(d) is not None)


def _dominant_dtype(inputs) -> str:
    """The dtype the kernel computes in: its widest floating-point tensor operand's."""
    best, best_size = "Float", -1
    for _, d in inputs:
        dtype = _torch_dtype(d)
        if dtype is not None and dtype.is_floating_point and dtype.itemsize > best_size:
            best, best_size = d, dtype.itemsize
    return best


def estimate_activity(name: str, inputs, outputs, profile: ChipProfile | None = None,
                      lnc: int | None = None) -> Estimate:
    """`inputs`/`outputs`: (shape, dtype name) pairs as csrc/profiler records them."""
    if profile is None or lnc is None:
        cfg = config.current()
        profile = profile or cfg.profile
        lnc = lnc or cfg.logical_nc_config
    flops = count_flops(name, inputs, outputs)
    nbytes = _nbytes(inputs) + _nbytes(outputs)
    dtype = _dominant_dtype(inputs)
    return Estimate(name=name, flops=flops, bytes=nbytes,
                    compute_s=flops / peak_flops(profile, lnc, _torch_dtype(dtype)),
                    memory_s=nbytes / hbm_bandwidth(profile, lnc),
                    launch_s=profile.kernel_launch_s, dtype=dtype)


def estimate_records(records, profile: ChipProfile | None = None, lnc: int | None = None):
    """(record, Estimate) for every kernel record. User ranges are skipped, and so are copies
    between host and device: they cross the host link, not HBM, and the profile table has no
    figure for that link to estimate them with."""
    return [(r, estimate_activity(r["name"], r["inputs"], r["outputs"], profile, lnc))
            for r in records if not r.get("annotation") and not r.get("memcpy")]
