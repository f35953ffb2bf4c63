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


def pytest_collection_modifyitems(config, items):
    """Under NEURON_MEMORY_PROTECT=1 (`make test-protect`), sharing neuron tensors between
    processes is refused by design (tests/runtime/test_memory_protect.py checks the refusal): the
    tests marked `ipc` skip, saying why."""
    from torchneuron.runtime import config as neuron_config

    if not neuron_config.current().memory_protect:
        return
    skip = pytest.mark.skip(reason="IPC is refused under NEURON_MEMORY_PROTECT=1")
    for item in items:
        if "ipc" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def python():
    return run_python


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def pytest_terminal_summary(terminalreporter):
    """In fused mode (`make test-fused`), what the suite's process held, compiled and fused: the
    compile cache's hit rate on the suite."""
    import torchneuron

    if not torch.neuron.is_initialized() or torchneuron.runtime.execution.mode() != "fused":
        return
    from torchneuron.fused_eager import queue_feeder

    s = queue_feeder.stats()
    chains = max(1, s["chains"])
    terminalreporter.write_line(
        f"fused eager: {s['ops_held']} ops held; {s['chains']} chains handed over, "
        f"{s['chains_fused']} ({100 * s['chains_fused'] / chains:.1f}%) ran fused covering "
        f"{s['ops_fused']} ops; {s['signatures']} signatures, {s['requested']} hot, "
        f"{s['ready']} compiled ({s['fxgraph_cache_hit']} from the disk cache), "
        f"{s['failed']} refused; {s['compile_seconds']:.1f} s compiling")
