"""Fixtures of the kernel library's tests: the kernel mode (fast or simulate) as the configuration
would give it, so one process tests both without restarting under another NEURON_KERNEL_MODE
(test_mode.py starts one process with the variable set, end to end)."""

import dataclasses

import pytest

from torchneuron.runtime import config


def use_mode(monkeypatch, mode: str) -> None:
    monkeypatch.setattr(config, "_outcome", dataclasses.replace(config.current(),
                                                                kernel_mode=mode))


@pytest.fixture(params=["fast", "simulate"])
def mode(request, monkeypatch):
    use_mode(monkeypatch, request.param)
    return request.param


@pytest.fixture
def simulate(monkeypatch):
    use_mode(monkeypatch, "simulate")
