"""Shared test helpers. Tests mirror the package folders; every neuron result is compared with
the CPU's."""

import os
import subprocess
import sys

import pytest
import torch


def run_python(code: str, env: dict | None = None, timeout: float = 120,
               args: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """Runs `code` (with `args` as sys.argv[1:]) in a fresh interpreter (for autoload,
    environment and crash-isolation tests). `env` updates this process's environment; a variable
    given as None is removed."""
    full_env = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            full_env.pop(name, None)
        else:
            full_env[name] = value
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout)


@pytest.fixture
def python():
    return run_python


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
