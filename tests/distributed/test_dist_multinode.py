"""Two "nodes" on this machine: two torchrun launchers (`--nnodes 2 --nproc-per-node 2`, node
ranks 0 and 1) rendezvous on 127.0.0.1, as on two hosts; 4 ranks train DDP and FSDP2 to the
losses and weights of one CPU process and save a distributed checkpoint, which 2 ranks of a
single launcher then load bit for bit. docs/distributed.md says how to run it on real hosts."""

import os
import subprocess
import sys

import pytest
import torch
from dist_world import free_port
from test_dist_parallel import batches, make_mlp, train_reference

pytestmark = pytest.mark.slow  # 6 processes start on 2 cores: about a minute
HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "multinode_worker.py")


def torchrun(nnodes: int, node_rank: int, port: int, phase: str, out) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}",
         "--nproc-per-node=2", f"--node-rank={node_rank}", "--master-addr=127.0.0.1",
         f"--master-port={port}", WORKER, phase, str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(launchers) -> None:
    for p in launchers:
        try:
            log, _ = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for q in launchers:
                q.kill()
            raise
        assert p.returncode == 0, log[-4000:]


def test_two_launchers_train_ddp_fsdp2_and_reload_a_checkpoint_on_fewer_ranks(tmp_path):
    port = free_port()
    finish([torchrun(2, node, port, "train", tmp_path) for node in (0, 1)])
    ref_losses, ref_state = train_reference(make_mlp(), batches())
    hosts = set()
    for rank in range(4):
        found = torch.load(tmp_path / f"train_{rank}.pt")
        assert found["world"] == 4
        hosts.add(found["host_rank"])
        for kind in ("ddp", "fsdp"):
            torch.testing.assert_close(torch.tensor(found[f"{kind}_losses"]),
                                       torch.tensor(ref_losses))
            for k, v in ref_state.items():
                torch.testing.assert_close(found[f"{kind}_state"][k], v, msg=f"{kind} {k}")
    assert hosts == {("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")}  # 2 nodes x 2 processes

    saved = torch.load(tmp_path / "train_0.pt")["fsdp_state"]
    finish([torchrun(1, 0, free_port(), "load", tmp_path)])
    for rank in range(2):
        loaded = torch.load(tmp_path / f"load_{rank}.pt")["loaded"]
        for k, v in saved.items():
            assert torch.equal(loaded[k], v), k
