"""Shared test helpers. Tests mirror the package folders; every neuron result is compared with
the CPU's."""

import os
import subprocess
import sys

import pytest
import torch


def run_python(code: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (for autoload, environment and crash-isolation tests)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


@pytest.fixture
def python():
    return run_python


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
