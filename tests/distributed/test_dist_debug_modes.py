"""PyTorch's own debugging aids work on the neuron backend as on gloo: dist.monitored_barrier
(which names the ranks that did not arrive) and TORCH_DISTRIBUTED_DEBUG=DETAIL (c10d wraps the
backend in ProcessGroupWrapper, which checks every collective's fingerprint over a helper gloo
group)."""

import datetime
import re
import time

import pytest
import torch
import torch.distributed as dist
from dist_world import World

WORLD_SIZE = 3


def dev():
    return torch.device("neuron", torch.neuron.current_device())


def monitored_body(backend):
    group = dist.new_group([0, 1, 2], backend=backend)
    dist.monitored_barrier(group, timeout=datetime.timedelta(seconds=10))  # all arrive: passes
    if dist.get_rank() == 1:
        time.sleep(3)
    try:
        dist.monitored_barrier(group, timeout=datetime.timedelta(seconds=1))
    except RuntimeError as e:
        return str(e).splitlines()[0]
    return None


def test_monitored_barrier_names_the_late_rank_as_on_gloo(world):
    neuron = world.run(monitored_body, "neuron", timeout=60)
    gloo = world.run(monitored_body, "gloo", timeout=60)
    # gloo's monitored barrier: rank 0 names the ranks that did not arrive; the others learn
    # that rank 0 failed. The neuron group's answers are gloo's, word for word.
    assert "Rank 1 failed to pass monitoredBarrier in 1000 ms" in neuron[0]
    # (the other ranks' errors name rank 0's gloo port, which differs between the groups)
    assert [re.sub(r":\d+\b", ":PORT", e) for e in neuron] == \
        [re.sub(r":\d+\b", ":PORT", e) for e in gloo]


def detail_body():
    t = torch.arange(4.0, device=dev()) + dist.get_rank()
    dist.all_reduce(t)
    mismatch = None
    try:
        dist.all_reduce(torch.ones(4 if dist.get_rank() == 0 else 8, device=dev()))
    except RuntimeError as e:
        mismatch = str(e)
    return t.cpu(), mismatch


@pytest.mark.parametrize("neuron_check", ["1", "0"])
def test_distributed_debug_detail(neuron_check, monkeypatch):
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL")
    monkeypatch.setenv("NEURON_DIST_CHECK", neuron_check)
    with World(2, pg_timeout_s=10) as w:
        for t, mismatch in w.run(detail_body, timeout=60):
            torch.testing.assert_close(t, torch.arange(4.0) * 2 + 1)
            if neuron_check == "1":  # the backend's own check comes first
                assert "mismatched collective c10d::allreduce_" in mismatch, mismatch
            else:  # c10d's fingerprint check, as for gloo
                assert "Detected mismatch between collectives on ranks" in mismatch, mismatch
