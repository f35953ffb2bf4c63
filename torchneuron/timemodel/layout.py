"""How the user declares a step's ranks: `ranks` in all, `tp` of them splitting each layer
(tensor parallel), `pp` pipeline stages, `fsdp` sharding parameters, gradients and optimizer
state, and the rest data parallel (dp = ranks / (tp * pp * fsdp)). Checked when made, so a layout
that cannot run is an error naming the figure, not a silent guess."""

from __future__ import annotations

from dataclasses import dataclass

from ..runtime.profiles import MACHINES, MachineProfile


def machine_named(name: str) -> MachineProfile:
    if name not in MACHINES:
        raise ValueError(f"unknown machine profile {name!r}: known profiles are "
                         f"{', '.join(sorted(MACHINES))}")
    return MACHINES[name]


@dataclass(frozen=True)
class Layout:
    ranks: int = 1
    tp: int = 1
    pp: int = 1
    fsdp: int = 1
    lnc: int | None = None  # physical cores per rank; None: the machine's default

    def __post_init__(self):
        for name in ("ranks", "tp", "pp", "fsdp"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"layout {name}={value!r}: must be a positive integer")
        if self.lnc is not None and self.lnc not in (1, 2):
            raise ValueError(f"layout lnc={self.lnc!r}: a logical core is 1 or 2 physical cores")
        split = self.tp * self.pp * self.fsdp
        if self.ranks % split:
            raise ValueError(
                f"layout tp={self.tp} x pp={self.pp} x fsdp={self.fsdp} = {split} does not divide "
                f"the {self.ranks} ranks: the data-parallel degree would be {self.ranks / split:g}")

    @property
    def dp(self) -> int:
        return self.ranks // (self.tp * self.pp * self.fsdp)

    def lnc_on(self, machine: MachineProfile) -> int:
        lnc = self.lnc or machine.default_lnc
        if machine.kind == "gpu" and lnc != 1:
            raise ValueError(f"layout lnc={lnc}: {machine.name} has no logical cores")
        if machine.cores_per_chip % lnc:
            raise ValueError(f"layout lnc={lnc} does not divide {machine.name}'s "
                             f"{machine.cores_per_chip} cores per chip")
        return lnc

    def check_on(self, machine: MachineProfile) -> int:
        """The rank's lnc; raises if a tensor-parallel group would span instances (its
        per-layer collectives would run over the network; no published figure backs that)."""
        lnc = self.lnc_on(machine)
        per_instance = machine.ranks_per_instance(lnc)
        if self.tp > per_instance:
            raise ValueError(f"layout tp={self.tp} spans instances: {machine.instance} has "
                             f"{per_instance} ranks at lnc={lnc}")
        return lnc

    def describe(self) -> str:
        parts = [f"{self.ranks} ranks", f"tp={self.tp}"]
        if self.pp > 1:
            parts.append(f"pp={self.pp}")
        if self.fsdp > 1:
            parts.append(f"fsdp={self.fsdp}")
        parts.append(f"dp={self.dp}")
        return " ".join(parts)
