"""The NeuronCore's limits, from the profile table, and the checks every instruction shares.

Each check raises NkiValidationError with a rule id (listed in docs/nki.md), the instruction, the
buffer and the shapes. The figures come from torchneuron/runtime/profiles.py, the one table of
device facts; the selected profile is the process's (NEURON_PROFILE) unless a kernel names its
own with `nki.jit(platform_target=...)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...runtime.profiles import PROFILES, ChipProfile
from .errors import NkiValidationError, describe
from .tensor import NkiTensor

# Names NKI accepts for a target (nki.jit's platform_target, NEURON_PLATFORM_TARGET_OVERRIDE).
TARGET_NAMES = {"trn2": "trn2", "gen3": "trn2", "trn3": "trn3", "gen4": "trn3"}

PSUM_BANK_BYTES_V3 = 2048  # one bank holds 512 float32 per partition on NeuronCore-v2/v3
STATIONARY_FMAX = 128  # Tensor Engine columns
BN_STATS_FMAX = 512
TRANSPOSE_VECTOR_MAX = 32  # Vector Engine nc_transpose handles [32, 32] or smaller


@dataclass(frozen=True)
class Limits:
    profile: str
    nc_version: str
    pmax: int
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int
    psum_banks: int
    moving_fmax: int

    @property
    def psum_bank_bytes(self) -> int:
        return self.psum_bytes_per_partition // self.psum_banks

    @property
    def is_v4(self) -> bool:
        return self.nc_version == "gen4"


def limits_for(profile: ChipProfile) -> Limits:
    return Limits(profile.name, profile.nc_version, profile.partitions,
                  profile.sbuf_bytes_per_partition, profile.psum_bytes_per_partition,
                  profile.psum_banks, profile.matmul_moving_fmax)


def resolve_target(target: str | None) -> Limits:
    if target is None:
        from ...runtime import config
        return limits_for(config.current().profile)
    name = TARGET_NAMES.get(str(target).lower())
    if name is None:
        raise ValueError(f"platform_target={target!r} is not a target of the software NeuronCore; "
                         f"accepted: {', '.join(sorted(TARGET_NAMES))}")
    return limits_for(PROFILES[name])


def fail(rule: str, message: str) -> None:
    raise NkiValidationError(rule, message)


def elements_per_partition(t) -> int:
    return math.prod(t.shape[1:]) if len(t.shape) > 1 else 1


def require_tensor(instr: str, role: str, t) -> None:
    if not isinstance(t, NkiTensor):
        fail("operand-type", f"{instr}: {role} must be an NKI tensor, got {type(t).__name__} "
             f"{t!r}")


def require_buffers(instr: str, role: str, t, allowed: tuple[str, ...]) -> None:
    require_tensor(instr, role, t)
    if t.buffer.kind not in allowed:
        fail("memory-access", f"{instr}: {role} {describe(t)} is in {t.buffer.kind.upper()}; "
             f"{instr} can access {role} only in {' or '.join(a.upper() for a in allowed)}")


def require_partitions(instr: str, role: str, t, limits: Limits) -> None:
    if t.shape[0] > limits.pmax:
        fail("partition-dim", f"{instr}: {role} {describe(t)} spans {t.shape[0]} partitions; a "
             f"NeuronCore has {limits.pmax} (nl.tile_size.pmax)")


def require_same_partitions(instr: str, roles: dict) -> None:
    items = [(r, t) for r, t in roles.items() if t is not None]
    first_role, first = items[0]
    for role, t in items[1:]:
        if t.shape[0] != first.shape[0]:
            fail("partition-mismatch", f"{instr}: {role} {describe(t)} has {t.shape[0]} "
                 f"partitions but {first_role} {describe(first)} has {first.shape[0]}")


def require_same_free_size(instr: str, roles: dict) -> None:
    items = [(r, t) for r, t in roles.items() if t is not None]
    first_role, first = items[0]
    n = elements_per_partition(first)
    for role, t in items[1:]:
        if elements_per_partition(t) != n:
            fail("free-size-mismatch", f"{instr}: {role} {describe(t)} has "
                 f"{elements_per_partition(t)} elements per partition but {first_role} "
                 f"{describe(first)} has {n}")


def on_chip_operand(instr: str, role: str, t, limits: Limits,
                    allowed: tuple[str, ...] = ("sbuf", "psum")) -> None:
    """The checks every compute-engine operand passes: on chip, <= pmax partitions (a view
    cannot exceed its allocation, whose per-partition size nl.ndarray checked)."""
    require_buffers(instr, role, t, allowed)
    require_partitions(instr, role, t, limits)


def not_both_psum(instr: str, a_role: str, a, b_role: str, b) -> None:
    if a.buffer.kind == "psum" and b.buffer.kind == "psum":
        fail("psum-operands", f"{instr}: {a_role} {describe(a)} and {b_role} {describe(b)} are "
             "both in PSUM; an engine reads at most one operand from PSUM")
