"""Random numbers on neuron: each device's default generator, its state (get/set, per device and
for all), and seeding, with torch.cuda's names and defaults.

NEURON_RNG=cpu (apply_rng_setting) makes random ops on neuron that are given no generator draw
from the CPU's default generator itself, not the device's: one stream shared with the program's
CPU draws (a DataLoader's shuffle, a CPU-side init), consumed in program order (such ops run at
their call, never queued or fused), so a seeded program equals the same program on the CPU bit
for bit where the kernels are the same. The device's own generators stay, seeded and saved as
usual (torch.manual_seed seeds both); nothing draws from them but explicit
torch.Generator(device="neuron") arguments. Limit: DTensor's OffsetBasedRNGTracker moves the
device generator's offset per shard, which these ops no longer read, so sharded random ops are
not CUDA-style per-shard streams under it (docs/port.md)."""

from __future__ import annotations

import contextlib
from typing import Iterable, Iterator

import torch

from .._C import device as _device_c
from .._C import runtime as _runtime_c
from ._index import _device_index, _device_t

__all__ = ["default_generators", "get_rng_state", "get_rng_state_all", "set_rng_state",
           "set_rng_state_all", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "initial_seed"]


def default_generators() -> tuple[torch.Generator, ...]:
    return tuple(_device_c.default_generator(i) for i in range(_runtime_c.device_count()))


def _generator(device: _device_t) -> torch.Generator:
    return _device_c.default_generator(_device_index(device))


def get_rng_state(device: _device_t = "neuron") -> torch.Tensor:
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(_runtime_c.device_count())]


def set_rng_state(new_state: torch.Tensor, device: _device_t = "neuron") -> None:
    _generator(device).set_state(new_state.clone())


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for gen in default_generators():
        gen.manual_seed(int(seed))


def seed() -> None:
    _generator(None).seed()


def seed_all() -> None:
    first = None
    for gen in default_generators():
        if first is None:
            first = gen.seed()
        else:
            gen.manual_seed(first)


def apply_rng_setting(config) -> None:
    """NEURON_RNG, applied when the configuration is read (torchneuron/__init__.py)."""
    draw_from_cpu_generator(config.rng == "cpu")


def draw_from_cpu_generator(enabled: bool) -> None:
    """What NEURON_RNG=cpu sets (see above), for a program that compares its random draws with
    the CPU's, such as a battery whose models sample with torch.randperm. The configuration
    applies its own setting when it is read (at the device's first use): set this after."""
    _device_c.set_draws_from_cpu_generator(enabled)


def draws_from_cpu_generator() -> bool:
    return _device_c.draws_from_cpu_generator()


@contextlib.contextmanager
def drawing_from_cpu_generator() -> Iterator[None]:
    """draw_from_cpu_generator(True) for a block, the setting before it put back at its end."""
    before = draws_from_cpu_generator()
    draw_from_cpu_generator(True)
    try:
        yield
    finally:
        draw_from_cpu_generator(before)


def initial_seed() -> int:
    return _generator(None).initial_seed()
