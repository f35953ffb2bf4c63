"""Runs the rewritten corpus once per session, on neuron and on the CPU at the same time (two
cores): one process per device for the single-process programs, and a two-rank world per device
for the DDP script, launched the way torchrun would (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_*)."""

import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "corpus_runner.py")
SINGLE = ["mnist_cnn.fixed.py", "amp_benchmark.fixed.py", "hf_finetune.fixed.py",
          "linear_regression.fixed.ipynb"]
DDP = "ddp_train.fixed.py"
TIMEOUT = 600


def _env(device, **extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    if device == "cpu":  # no accelerator at all: torch does not load the neuron backend
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    return env


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _device_works():
    probe = ("import torch; import torchneuron; "
             "assert (torch.ones(2, device='neuron') + 1).cpu().tolist() == [2.0, 2.0]")
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       timeout=TIMEOUT)
    return p.returncode == 0, p.stderr[-2000:]


@pytest.fixture(scope="session")
def corpus_runs(tmp_path_factory):
    ok, why = _device_works()
    if not ok:
        pytest.skip(f"the neuron device does not work here yet:\n{why}")
    dirs, procs = {}, []
    for device in ("cpu", "neuron"):
        out = str(tmp_path_factory.mktemp(device))
        dirs[device] = out
        cmd = [sys.executable, RUNNER, "--device", device, out]
        procs.append(subprocess.Popen(cmd + SINGLE, env=_env(device), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
        port = _free_port()
        for rank in range(2):
            env = _env(device, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            procs.append(subprocess.Popen(cmd + [DDP], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
    failures = []
    for p in procs:
        try:
            output, _ = p.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            output, _ = p.communicate()
        if p.returncode != 0:
            failures.append(f"{' '.join(p.args[2:])} exited {p.returncode}:\n{output[-3000:]}")
    assert not failures, "\n\n".join(failures)
    return dirs
