"""Asynchronous execution (NEURON_EAGER_MODE=async, csrc/runtime/Execution.h, csrc/aten/Launch.h): one process
runs every check of async_checks.py with the mode set (the mode is per process, read at the first
device use), and each test reads its check's outcome. The launch-blocking and configuration
checks start their own processes."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import async_checks  # noqa: E402

sys.path.remove(str(HERE))


def run_checks(env_extra: dict[str, str], names=()) -> dict[str, dict]:
    env = dict(os.environ, **env_extra)
    proc = subprocess.run([sys.executable, str(HERE / "async_checks.py"), *names], env=env,
                          capture_output=True, text=True, timeout=900)
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            results[r["name"]] = r
    assert results, f"no check ran (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return results


@pytest.fixture(scope="module")
def async_results():
    return run_checks({"NEURON_EAGER_MODE": "async"})


@pytest.mark.parametrize("name", sorted(async_checks.CHECKS))
def test_async(async_results, name):
    r = async_results.get(name)
    assert r is not None, f"{name} did not run (the process ended before it)"
    assert r["ok"], r["error"]


def test_launch_blocking_raises_a_kernel_error_at_the_call(python):
    code = ("import torch\n"
            "from torchneuron._C import launch as _launch_c\n"
            "x = torch.randn(1000, 8, device='neuron')\n"
            "big = torch.randn(768, 768, device='neuron'); y = big @ big\n"
            "try:\n"
            "    torch.index_select(x, 0, torch.tensor([0, 5000], device='neuron'))\n"
            "except IndexError as e:\n"
            "    print('raised at the call:', e)\n"
            "print(_launch_c.launch_blocking(), _launch_c.device_idle())\n")
    out = python(code, {"NEURON_EAGER_MODE": "async", "NEURON_LAUNCH_BLOCKING": "1"},
                     timeout=300)
    assert "raised at the call: index out of range" in out.stdout, out.stdout + out.stderr
    assert out.stdout.strip().endswith("True True"), out.stdout


@pytest.mark.parametrize("var,value", [("NEURON_EAGER_MODE", "fast"),
                                       ("NEURON_LAUNCH_BLOCKING", "yes")])
def test_bad_mode_settings_are_refused_naming_the_variable(var, value, python):
    code = ("import torch, torchneuron\n"
            "try:\n"
            "    torch.neuron.device_count()\n"
            "except ValueError as e:\n"
            "    print(type(e).__name__, e)\n")
    out = python(code, {var: value}, timeout=300)
    assert f"ConfigError {var}={value!r} is not valid" in out.stdout, out.stdout + out.stderr


def test_async_is_the_default_mode(python):
    code = "import torchneuron; print(torchneuron.runtime.execution.mode())"
    out = python(code, {"NEURON_EAGER_MODE": None}, timeout=300)
    assert out.stdout.strip() == "async", out.stdout + out.stderr


def test_sync_mode_never_queues(python):
    code = ("import torch, torchneuron\n"
            "from torchneuron._C import launch as _launch_c\n"
            "x = torch.randn(768, 768, device='neuron')\n"
            "y = x @ x\n"
            "idle = _launch_c.device_idle()\n"
            "torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu())\n"
            "print(torchneuron.runtime.execution.mode(), idle)\n")
    out = python(code, {"NEURON_EAGER_MODE": "sync"}, timeout=300)
    assert out.stdout.strip() == "sync True", out.stdout + out.stderr


def test_freeing_a_tensor_another_stream_still_uses_is_caught_unless_recorded(python):
    # The use after free CUDA users hit: x is allocated on the current stream, used on a side
    # stream, and dropped before the side stream's work is done. Without record_stream the
    # device says so (once per pair of streams); with it, nothing is said. Values stay right.
    code = ("import torch, torchneuron\n"
            "def use_on_side(record):\n"
            "    side = torch.neuron.Stream()\n"
            "    a = torch.randn(768, 768); x = a.to('neuron')\n"
            "    with torch.neuron.stream(side):\n"
            "        y = x @ x @ x\n"
            "        if record: x.record_stream(side)\n"
            "    del x\n"
            "    side.synchronize()\n"
            "    torch.testing.assert_close(y.cpu(), a @ a @ a, rtol=1e-4, atol=1e-3)\n"
            "    return side.stream_id\n"
            "w = torch.randn(768, 768, device='neuron'); w @ w @ w  # first calls run at once\n"
            "torch.neuron.synchronize()\n"
            "print('unrecorded', use_on_side(False), flush=True)\n"
            "print('recorded', use_on_side(True), flush=True)\n")
    out = python(code, {"NEURON_EAGER_MODE": "async"}, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    ids = dict(line.split() for line in out.stdout.splitlines())
    warnings = [line for line in out.stderr.splitlines() if "still used it" in line]
    assert len(warnings) == 1, out.stderr[-3000:]
    assert f"freed while stream {ids['unrecorded']} still used it" in warnings[0]
    assert "record_stream" in warnings[0]
