"""`nki.compiler` (NKI 0.8): `CompileConfig`, the per-kernel compile configuration that
`@nki.jit(compile_config=...)` takes, and `Allocation`, how the compiler places tiles.

NKI allocation (`Allocation.LINEAR`) and NKI scheduling (`scheduling=True`) choose addresses and
an instruction order on hardware; they do not change what a correct kernel computes. The software
NeuronCore runs each instruction in program order on its own memory, so a kernel's results here do
not depend on the configuration: it is checked, recorded on the kernel (`kernel.compile_config`)
and otherwise has no effect. The optimization options whose values are enums this module does not
know the members of (AddressRotation, AllocationMode, SchedulingHeuristic, OptLevel) are refused
rather than accepted with invented values.
"""

from __future__ import annotations

import enum

from .errors import NkiTypeError, NkiUnsupportedError, NkiValidationError


class Allocation(enum.Enum):
    """How the compiler assigns SBUF, PSUM and HBM addresses to a kernel's tiles."""
    COLORING = "coloring"  # the current flow: graph coloring after tracing (the default)
    LINEAR = "linear"  # the new flow: linear scan, an address from first write to last read


# The boolean options of the 0.8 reference (each an on/off switch of one optimization).
_SWITCHES = ("barrier_check", "dead_code_elim", "dma_copy_elim", "element_widening",
             "engine_balancing", "nki_alloc_fallback", "non_ssa_legalization", "prefetch_auto",
             "register_load_reuse", "remove_overwritten_writes", "remove_unused_instructions",
             "sbuf_allocation_fallback", "split_reused_buffers", "tensor_copy_elim")
# Options typed by enums whose members the public reference pages do not list.
_ENUM_OPTIONS = {"address_rotation": "AddressRotation",
                 "experimental_allocation_mode": "AllocationMode",
                 "experimental_hbm_allocation_mode": "AllocationMode",
                 "experimental_psum_allocation_mode": "AllocationMode",
                 "experimental_sbuf_allocation_mode": "AllocationMode",
                 "experimental_scheduling_heuristic": "SchedulingHeuristic",
                 "opt_level": "OptLevel"}


class CompileConfig:
    """CompileConfig(allocation=Allocation.LINEAR, scheduling=True, ...): keyword-only."""

    def __init__(self, *, allocation: Allocation = Allocation.COLORING, scheduling: bool = False,
                 **options):
        if not isinstance(allocation, Allocation):
            raise NkiTypeError(f"CompileConfig: allocation={allocation!r} must be an "
                               "nki.compiler.Allocation (Allocation.COLORING or "
                               "Allocation.LINEAR)")
        if not isinstance(scheduling, bool):
            raise NkiTypeError(f"CompileConfig: scheduling={scheduling!r} must be True or False")
        if scheduling and allocation is not Allocation.LINEAR:
            # The release notes and the compile-configuration deep dive: scheduling is added on
            # top of NKI allocation ("with scheduling=True in addition").
            raise NkiValidationError("compile-config", "CompileConfig: scheduling=True needs "
                                     "allocation=Allocation.LINEAR; NKI scheduling orders the "
                                     "instructions of a kernel that NKI allocates")
        for name, value in options.items():
            if name in _ENUM_OPTIONS:
                raise NkiUnsupportedError(f"CompileConfig: {name}= takes an "
                                          f"nki.compiler.{_ENUM_OPTIONS[name]}, whose values the "
                                          "software NeuronCore does not model; docs/nki.md "
                                          "lists what runs")
            if name not in _SWITCHES:
                raise TypeError(f"CompileConfig() got an unexpected keyword argument {name!r}")
            if not isinstance(value, bool):
                raise NkiTypeError(f"CompileConfig: {name}={value!r} must be True or False")
        self.allocation = allocation
        self.scheduling = scheduling
        self.options = dict(options)

    def __getattr__(self, name):
        if name in _SWITCHES:  # its value, or None when unset (the compiler's default applies)
            return self.__dict__.get("options", {}).get(name)
        raise AttributeError(name)

    def __eq__(self, other) -> bool:
        return isinstance(other, CompileConfig) and (
            (self.allocation, self.scheduling, self.options)
            == (other.allocation, other.scheduling, other.options))

    def __repr__(self) -> str:
        fields = [f"allocation=Allocation.{self.allocation.name}",
                  f"scheduling={self.scheduling}"] + [f"{k}={v}" for k, v in self.options.items()]
        return f"CompileConfig({', '.join(fields)})"


def as_compile_config(value) -> CompileConfig:
    """@nki.jit's compile_config=: None (the NKI 0.7 flow) or a CompileConfig."""
    if value is None:
        return CompileConfig()
    if not isinstance(value, CompileConfig):
        raise NkiTypeError(f"@nki.jit: compile_config={value!r} must be an "
                           "nki.compiler.CompileConfig")
    return value
