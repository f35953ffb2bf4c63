"""The time of one collective over `ranks` ranks, as ring algorithms take it: all-reduce in
2(p-1) steps moving 2(p-1)/p of the buffer through each rank's link, all-gather, reduce-scatter
and all-to-all in p-1 steps moving (p-1)/p. Each step has a fixed cost (link_step_s inside an
instance over NeuronLink / NVLink, network_step_s across instances over EFA); the bytes go at the
rank's share of its chip's links, or of the instance's network once the group spans instances."""

from __future__ import annotations

from ..runtime.profiles import MachineProfile

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def link_bandwidth_per_rank(machine: MachineProfile, lnc: int, ranks: int) -> float:
    inside = machine.link_bandwidth_per_chip / machine.logical_cores_per_chip(lnc)
    per_instance = machine.ranks_per_instance(lnc)
    if ranks <= per_instance:
        return inside
    return min(inside, machine.network_bandwidth_per_instance / per_instance)


def collective_s(kind: str, nbytes: int, ranks: int, machine: MachineProfile, lnc: int) -> float:
    """`nbytes`: the whole buffer (all-reduce), the gathered output (all-gather), the input to
    scatter (reduce-scatter), the buffer each rank sends (all-to-all)."""
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}: expected one of {', '.join(KINDS)}")
    if ranks < 1:
        raise ValueError(f"a collective needs at least one rank, got {ranks}")
    if ranks == 1:
        return 0.0
    steps = (ranks - 1) * (2 if kind == "all_reduce" else 1)
    share = steps / ranks
    spans = ranks > machine.ranks_per_instance(lnc)
    step_s = machine.network_step_s if spans else machine.link_step_s
    return steps * step_s + share * nbytes / link_bandwidth_per_rank(machine, lnc, ranks)
