"""Random numbers on neuron: each device's default generator, its state (get/set, per device and
for all), and seeding, with torch.cuda's names and defaults."""

from __future__ import annotations

from typing import Iterable

import torch

from .. import _C
from ._index import _device_index, _device_t

__all__ = ["default_generators", "get_rng_state", "get_rng_state_all", "set_rng_state",
           "set_rng_state_all", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "initial_seed"]


def default_generators() -> tuple[torch.Generator, ...]:
    return tuple(_C._default_generator(i) for i in range(_C._device_count()))


def _generator(device: _device_t) -> torch.Generator:
    return _C._default_generator(_device_index(device))


def get_rng_state(device: _device_t = "neuron") -> torch.Tensor:
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(_C._device_count())]


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


def initial_seed() -> int:
    return _generator(None).initial_seed()
