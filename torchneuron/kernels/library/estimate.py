"""The estimated Trainium time of one NKI kernel from its instructions, per engine, so a kernel
author sees which engine bounds it.

The kernel runs once on meta tensors (shapes and rules only, no arithmetic) while every
instruction it issues is counted by engine:

  Tensor Engine    nc_matmul, nc_transpose: the moving operand streams one column per cycle
                   through the 128x128 array, whatever share of the array the tile fills; the
                   array's clock comes from the profile's peak dense FLOP/s (the same figures
                   as the profiler's roofline, torchneuron/profiler/roofline.py):
                   clock = peak(bfloat16) / (2 * 128 * 128), and a float32 column costs
                   peak(bfloat16) / peak(float32) cycles.
  Vector, Scalar,  elementwise and reduction instructions: one element per partition per cycle
  GpSimd Engines   (all 128 partitions in parallel) plus a fixed issue cost per instruction.
  DMA              bytes between HBM and SBUF against the HBM bandwidth of one NeuronCore.

Engines run concurrently, so the kernel takes as long as its busiest engine, plus the profile's
fixed launch cost. What the model ignores: dependencies between engines (a kernel whose
engines wait on each other takes longer), PSUM/SBUF bank conflicts, DMA queue and descriptor
costs, and the compiler's scheduling. The Vector/Scalar/GpSimd clock and the per-instruction
cost come from the profile (engine_clock_hz, engine_instruction_overhead_cycles), where they are
marked as assumptions: no published figure exists for them.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import torch

from ...profiler.roofline import hbm_bandwidth, peak_flops
from ...runtime import config
from ...runtime.profiles import PROFILES, ChipProfile
from ..nki import dtypes as nki_dtypes
from ..nki import isa

ARRAY = 128  # the Tensor Engine's rows and columns (the partitions)

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")
_ENGINE_OF = {
    "nc_matmul": "tensor", "nc_transpose": "tensor",
    "activation": "scalar", "activation_reduce": "scalar", "exponential": "scalar",
    "tensor_tensor": "vector", "tensor_scalar": "vector", "scalar_tensor_tensor": "vector",
    "tensor_reduce": "vector", "tensor_copy": "vector", "reciprocal": "vector",
    "bn_stats": "vector", "bn_aggr": "vector", "tensor_tensor_scan": "vector", "max8": "vector",
    "memset": "vector", "tensor_scalar_reduce": "vector", "tensor_copy_predicated": "vector",
    "range_select": "vector", "select_reduce": "vector", "nc_find_index8": "vector",
    "nc_match_replace8": "vector", "nc_stream_shuffle": "vector",
    "tensor_scalar_cumulative": "vector", "activate2": "scalar",
    "iota": "gpsimd", "affine_select": "gpsimd", "tensor_partition_reduce": "gpsimd",
    "sequence_bounds": "gpsimd", "nonzero_with_count": "gpsimd", "nc_n_gather": "gpsimd",
    "local_gather": "gpsimd",
    "dma_copy": "dma", "dma_transpose": "dma",
}


@dataclass
class KernelEstimate:
    name: str
    profile: str
    instructions: dict = field(default_factory=lambda: {e: 0 for e in ENGINES})
    engine_s: dict = field(default_factory=lambda: {e: 0.0 for e in ENGINES})
    dma_bytes: int = 0
    matmul_flops: int = 0
    launch_s: float = 0.0

    @property
    def seconds(self) -> float:
        return max(self.engine_s.values()) + self.launch_s

    @property
    def bound(self) -> str:
        """The busiest engine."""
        return max(self.engine_s, key=self.engine_s.get)

    def table_row(self) -> str:
        times = " | ".join(f"{self.engine_s[e] * 1e6:.2f}" for e in ENGINES)
        return f"| {self.name} | {times} | {self.seconds * 1e6:.2f} | {self.bound} |"


def _free(t) -> int:
    return math.prod(t.shape[1:]) if len(t.shape) > 1 else 1


def _tensor_args(args, kwargs):
    from ..nki.tensor import NkiTensor
    return [a for a in list(args) + list(kwargs.values()) if isinstance(a, NkiTensor)]


class _Counter:
    def __init__(self, est: KernelEstimate, profile: ChipProfile):
        self.est = est
        bf16 = peak_flops(profile, 1, torch.bfloat16)
        self.tensor_clock = bf16 / (2 * ARRAY * ARRAY)
        self.fp32_slowdown = bf16 / peak_flops(profile, 1, torch.float32)
        self.bandwidth = hbm_bandwidth(profile, 1)
        self.engine_clock = profile.engine_clock_hz
        self.overhead = profile.engine_instruction_overhead_cycles

    def record(self, name: str, args, kwargs) -> None:
        engine = _ENGINE_OF.get(name)
        if engine is None:
            return
        est = self.est
        est.instructions[engine] += 1
        tensors = _tensor_args(args, kwargs)
        if engine == "dma":
            dst, src = kwargs.get("dst", args[0] if args else None), kwargs.get("src")
            if src is None and len(args) > 1:
                src = args[1]
            if "hbm" in (dst.buffer.kind, src.buffer.kind):
                nbytes = math.prod(dst.shape) * dst.dtype.itemsize
                est.dma_bytes += nbytes
                est.engine_s["dma"] += nbytes / self.bandwidth
            return
        if engine == "tensor":
            get = kwargs.get
            if name == "nc_matmul":
                stationary = get("stationary", args[1] if len(args) > 1 else None)
                moving = get("moving", args[2] if len(args) > 2 else None)
                columns, wide = _free(moving), moving.dtype in (nki_dtypes.float32,
                                                                nki_dtypes.tfloat32)
                est.matmul_flops += 2 * moving.shape[0] * _free(stationary) * columns
            else:
                data = get("data", args[1] if len(args) > 1 else None)
                columns, wide = data.shape[0], data.dtype is nki_dtypes.float32
            cycles = columns * (self.fp32_slowdown if wide else 1) + self.overhead
            est.engine_s["tensor"] += cycles / self.tensor_clock
            return
        elements = max((_free(t) for t in tensors), default=1)
        est.engine_s[engine] += (elements + self.overhead) / self.engine_clock


_lock = threading.Lock()  # counting wraps nki.isa's functions for the length of one trace


def _to_meta(value):
    if isinstance(value, torch.Tensor):
        return torch.empty(value.shape, dtype=value.dtype, device="meta")
    return value


def estimate(kernel, *args, profile: str | None = None, **kwargs) -> KernelEstimate:
    """Traces `kernel` (an @nki.jit kernel, with its grid if any) on meta tensors shaped like
    `args` and returns its per-engine estimate on `profile` (default: NEURON_PROFILE's)."""
    chip = PROFILES[profile] if profile is not None else config.current().profile
    name = getattr(kernel, "__name__", repr(kernel))
    est = KernelEstimate(name=name, profile=chip.name, launch_s=chip.kernel_launch_s)
    counter = _Counter(est, chip)
    with _lock:
        originals = {n: getattr(isa, n) for n in _ENGINE_OF}

        def counting(instr_name, fn):
            def instruction(*a, **k):
                counter.record(instr_name, a, k)
                return fn(*a, **k)
            return instruction

        try:
            for n, fn in originals.items():
                setattr(isa, n, counting(n, fn))
            kernel(*(_to_meta(a) for a in args), **{k: _to_meta(v) for k, v in kwargs.items()})
        finally:
            for n, fn in originals.items():
                setattr(isa, n, fn)
    return est


TABLE_HEADER = ("| kernel | " + " | ".join(f"{e} (us)" for e in ENGINES)
                + " | estimate (us) | bound by |\n|---|" + "---|" * (len(ENGINES) + 2))
