"""Ways into the `neuron` backend: by name or as the device's default, with tcp://, file:// and
torchrun's env:// rendezvous."""

import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
from dist_world import World, free_port

HERE = os.path.dirname(os.path.abspath(__file__))


def test_neuron_is_the_default_backend_for_the_device():
    assert dist.get_default_backend_for_device("neuron") == "neuron"
    assert dist.get_default_backend_for_device("cpu") == "gloo"  # CPU keeps its own default
    assert dist.Backend("neuron") == "neuron"


def test_pg_options_are_refused():
    from torchneuron.distributed.backend import _create_backend

    with pytest.raises(ValueError, match="neuron backend takes no pg_options"):
        _create_backend(None, object())


def default_group_body():
    device = torch.device("neuron", torch.neuron.current_device())
    t = torch.arange(4.0, device=device) + dist.get_rank()
    c = torch.arange(4.0) + dist.get_rank()
    dist.all_reduce(t)
    dist.all_reduce(c)  # CPU tensors also work on the device's default group
    sub = dist.new_group([0, 1])
    u = torch.ones(2, device=device)
    dist.all_reduce(u, group=sub)
    dist.barrier()
    return t.cpu(), c, u.cpu(), str(t.device)


@pytest.mark.parametrize("backend,init", [
    (None, "file"), pytest.param("neuron", "file", marks=pytest.mark.slow)],
                         ids=["no-backend-named", "named"])
def test_file_init(backend, init):
    with World(2, backend=backend, init=init) as w:
        for r, (t, c, u, where) in enumerate(w.run(default_group_body)):
            torch.testing.assert_close(t, c)
            torch.testing.assert_close(t, torch.arange(4.0) * 2 + 1)
            torch.testing.assert_close(u, torch.full((2,), 2.0))
            assert where == f"neuron:{r}"


@pytest.mark.parametrize("backend", ["neuron", "none"])
def test_torchrun_env_rendezvous(backend):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--nproc-per-node=2",
           "--master-addr=127.0.0.1", f"--master-port={free_port()}",
           os.path.join(HERE, "torchrun_worker.py"), backend]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    for r in range(2):
        assert f"rank {r}/2 ok on neuron:{r} backend=" in done.stdout
    assert ("backend=neuron" in done.stdout) == (backend == "neuron")


def test_set_device_initializes_as_cuda_does(python):
    # What asks is_initialized() after set_device must see the chosen device: FakeTensor (run
    # by DTensor's sharding propagation) puts a tensor on "neuron" on the current device only
    # once it is initialized, and caches it; on neuron:0 it broke FSDP2 init on rank 1.
    done = python("import torch\n"
                  "from torch._subclasses.fake_tensor import FakeTensorMode\n"
                  "torch.neuron.set_device(1)\n"
                  "print(torch.neuron.is_initialized())\n"
                  "with FakeTensorMode():\n"
                  "    print(torch.empty(2, device='neuron').device)\n")
    assert done.stdout.split() == ["True", "neuron:1"], done.stderr
