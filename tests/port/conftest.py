"""Runs the rewritten corpus on neuron and on the CPU: one process per device for the
single-process programs, and a two-rank world per device for the DDP script, launched the way
torchrun would (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_*). The processes start as soon as
collection shows a test that needs them, so they run while the other tests do."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "corpus_runner.py")
SINGLE = ["mnist_cnn.fixed.py", "amp_benchmark.fixed.py", "hf_finetune.fixed.py",
          "linear_regression.fixed.ipynb", "gpt_train.fixed.py"]
DDP = "ddp_train.fixed.py"
# The regression corpus (issue 46): each original runs on the CPU too, and the fixed programs run
# on neuron with NEURON_RNG=cpu, so that they can equal the CPU bit for bit.
REGRESS = ["regress_guards.py", "regress_amp.py", "regress_seed.py", "regress_backend.py"]
TIMEOUT = 600
PROBE = ("import torch; import torchneuron; "
         "assert (torch.ones(2, device='neuron') + 1).cpu().tolist() == [2.0, 2.0]")

_runs: dict = {}  # filled by the collection hook: probe, processes, output folders


def _env(device, **extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    if device == "cpu":  # no accelerator at all: torch does not load the neuron backend
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    return env


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(cmd, env):
    """Output goes to a file: a pipe nobody reads yet would fill up and stall the child."""
    log = tempfile.NamedTemporaryFile("w+", prefix="port-corpus-", suffix=".log", delete=False)
    p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    p.log = log
    return p


def _launch():
    root = tempfile.mkdtemp(prefix="port-corpus-")
    _runs.update(root=root, dirs={}, procs=[],
                 probe=_start([sys.executable, "-c", PROBE], _env("neuron")))
    for device in ("cpu", "neuron"):
        out = os.path.join(root, device)
        os.mkdir(out)
        _runs["dirs"][device] = out
        cmd = [sys.executable, RUNNER, "--device", device, out]
        _runs["procs"].append(_start(cmd + SINGLE, _env(device)))
        fixed = [name.replace(".py", ".fixed.py") for name in REGRESS]
        _runs["procs"].append(_start(cmd + fixed, _env(device, NEURON_RNG="cpu")))
        if device == "cpu":
            _runs["procs"].append(_start(cmd + ["--original"] + REGRESS, _env(device)))
        port = _free_port()
        for rank in range(2):
            _runs["procs"].append(_start(cmd + [DDP], _env(
                device, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))))


@pytest.hookimpl(trylast=True)  # after -k / -m have deselected what will not run
def pytest_collection_modifyitems(session, config, items):
    if any("corpus_runs" in getattr(item, "fixturenames", ()) for item in items):
        _launch()


def pytest_sessionfinish(session, exitstatus):
    for p in [_runs.get("probe"), *_runs.get("procs", [])]:
        if p is None:
            continue
        if p.poll() is None:
            p.kill()
            p.wait()
        p.log.close()
        os.unlink(p.log.name)
    if "root" in _runs:
        shutil.rmtree(_runs["root"], ignore_errors=True)


def _wait(p):
    try:
        p.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    p.log.seek(0)
    return p.log.read()


@pytest.fixture(scope="session")
def corpus_runs():
    if not _runs:  # collected some other way: start now
        _launch()
    probe_output = _wait(_runs["probe"])
    if _runs["probe"].returncode != 0:
        pytest.skip(f"the neuron device does not work here yet:\n{probe_output[-2000:]}")
    failures = []
    for p in _runs["procs"]:
        output = _wait(p)
        if p.returncode != 0:
            failures.append(f"{' '.join(p.args[2:])} exited {p.returncode}:\n{output[-3000:]}")
    assert not failures, "\n\n".join(failures)
    return _runs["dirs"]
