"""The time of one op on one rank, per engine, from the machine's figures (runtime/profiles.py,
MACHINES). A rank is one logical NeuronCore: `lnc` physical cores that split every op between
them (a GPU rank is one GPU). Engines run concurrently, so an op takes as long as its busiest
engine plus its fixed cost (OpCost.seconds).

  Tensor Engine   a matmul is cut into tiles the 128x128 array can take: the contraction and
                  the stationary operand's free size in steps of 128 (a partial tile costs a full
                  one: the array's idle rows and columns are the tile-fill loss), the moving
                  operand's free size in steps of `moving_tile`; one MultiplyMoving costs
                  max(columns, matmul_min_cycles) cycles, float32 inputs fp32_matmul_factor times
                  more; loading the next stationary tile (a quarter of a MultiplyMoving of 128
                  columns) hides behind the current one. Either operand may be the stationary
                  one: the cheaper is taken, as the compiler would. A GPU: 128x128 output tiles,
                  one per SM per wave (wave quantization is its tile-fill loss).
  Vector Engine   pointwise ops of two inputs and reductions: 128 lanes, one element per lane
                  per cycle per input (bf16_vector_factor more for 16-bit data), plus a fixed
                  cost per instruction.
  Scalar Engine   transcendental functions (exp, silu, rsqrt, ...): 128 lanes, one input.
  DMA             bytes between HBM and the cores at the rank's share of HBM bandwidth.

Every term divides by the machine's efficiency (the share of peak a tuned kernel reaches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..runtime.profiles import MachineProfile


@dataclass
class OpCost:
    tensor: float = 0.0
    vector: float = 0.0
    scalar: float = 0.0
    dma: float = 0.0
    fixed: float = 0.0

    @property
    def seconds(self) -> float:
        return max(self.tensor, self.vector, self.scalar, self.dma) + self.fixed

    @property
    def bound(self) -> str:
        terms = {"tensor": self.tensor, "vector": self.vector, "scalar": self.scalar,
                 "dma": self.dma}
        return max(terms, key=terms.get)

    def __iadd__(self, other: "OpCost") -> "OpCost":
        self.tensor += other.tensor
        self.vector += other.vector
        self.scalar += other.scalar
        self.dma += other.dma
        self.fixed += other.fixed
        return self


def _is_16bit(dtype: torch.dtype) -> bool:
    return dtype in (torch.bfloat16, torch.float16)


def _is_fp8(dtype: torch.dtype) -> bool:
    return dtype in (torch.float8_e4m3fn, torch.float8_e5m2)


def peak_flops_per_rank(machine: MachineProfile, lnc: int, dtype: torch.dtype) -> float:
    if _is_fp8(dtype):
        chip = machine.peak_fp8_flops_per_chip
    elif _is_16bit(dtype):
        chip = machine.peak_bf16_flops_per_chip
    else:
        chip = machine.peak_fp32_flops_per_chip
    return chip / machine.logical_cores_per_chip(lnc)


def hbm_bandwidth_per_rank(machine: MachineProfile, lnc: int) -> float:
    return machine.hbm_bandwidth_per_chip / machine.logical_cores_per_chip(lnc)


def _matmul_cycles(stationary_free: int, k: int, moving_free: int, machine: MachineProfile,
                   k_tile: int) -> int:
    """Cycles of one physical Tensor Engine for stationary[k, stationary_free] against
    moving[k, moving_free]."""
    full, rest = divmod(moving_free, machine.moving_tile)
    mm = full * max(machine.moving_tile, machine.matmul_min_cycles)
    if rest:
        mm += max(rest, machine.matmul_min_cycles)
    load_stationary = machine.array // 4  # "up to 4x faster" than a MultiplyMoving of 128
    per_stationary = max(mm, load_stationary)
    return math.ceil(k / k_tile) * math.ceil(stationary_free / machine.array) * per_stationary


def _gpu_waves_s(m: int, k: int, n: int, machine: MachineProfile, lnc: int,
                 dtype: torch.dtype, batch: int) -> float:
    """Output tiles of `array` columns and `array` rows (half as many rows for a skinny
    operand: Hopper's smallest warpgroup MMA is 64 rows), one per SM per wave."""
    rows = machine.array // 2 if m <= machine.array // 2 else machine.array
    tiles = batch * math.ceil(m / rows) * math.ceil(n / machine.array)
    waves = math.ceil(tiles / machine.sms)
    per_sm = peak_flops_per_rank(machine, lnc, dtype) / machine.sms
    return waves * 2 * rows * machine.array * k / per_sm / machine.compute_efficiency


def tensor_engine_s(m: int, k: int, n: int, machine: MachineProfile, lnc: int,
                    dtype: torch.dtype = torch.bfloat16, batch: int = 1) -> float:
    """C[m, n] = A[m, k] @ B[k, n], `batch` times, on one rank."""
    if min(m, k, n, batch) <= 0:
        return 0.0
    if machine.kind == "gpu":
        return min(_gpu_waves_s(m, k, n, machine, lnc, dtype, batch),
                   _gpu_waves_s(n, k, m, machine, lnc, dtype, batch))
    # Double-row FP8 on NeuronCore-v3 and later takes a contraction of 256 per instruction.
    fp8_double = (_is_fp8(dtype)
                  and machine.peak_fp8_flops_per_chip > machine.peak_bf16_flops_per_chip)
    k_tile = machine.array * (2 if fp8_double else 1)
    cycles = batch * min(_matmul_cycles(m, k, n, machine, k_tile),
                         _matmul_cycles(n, k, m, machine, k_tile))
    if not (_is_16bit(dtype) or _is_fp8(dtype)):
        cycles *= machine.fp32_matmul_factor
    return cycles / (machine.tensor_clock_hz * lnc) / machine.compute_efficiency


def vector_engine_s(elements: int, machine: MachineProfile, lnc: int, inputs: int = 1,
                    dtype: torch.dtype = torch.float32, instructions: int = 1) -> float:
    """A pointwise op or a reduction over `elements` outputs (inputs, for a reduction)."""
    if elements <= 0:
        return 0.0
    lanes = machine.vector_lanes * (machine.bf16_vector_factor if _is_16bit(dtype) else 1)
    per_core = math.ceil(elements / lnc)
    cycles = max(1, inputs) * math.ceil(per_core / lanes)
    cycles += machine.instruction_overhead_cycles * instructions
    return cycles / machine.vector_clock_hz / machine.compute_efficiency


def scalar_engine_s(elements: int, machine: MachineProfile, lnc: int,
                    instructions: int = 1) -> float:
    """A transcendental function over `elements` (exp, silu, rsqrt, ...)."""
    if elements <= 0:
        return 0.0
    per_core = math.ceil(elements / lnc)
    cycles = math.ceil(per_core / machine.vector_lanes)
    cycles += machine.instruction_overhead_cycles * instructions
    return cycles / machine.scalar_clock_hz / machine.compute_efficiency


def dma_s(nbytes: int, machine: MachineProfile, lnc: int) -> float:
    """`nbytes` between HBM and the rank's cores."""
    if nbytes <= 0:
        return 0.0
    return nbytes / hbm_bandwidth_per_rank(machine, lnc) / machine.hbm_efficiency
