"""The memory advisor's FSDP2 estimate against a sharded run: a stack of MLP blocks trained with
Adam on 2 neuron ranks, each block and then the model under `fully_shard`, each rank on the full
batch of the single-device step (the advisor keeps activations per rank as they are). Each
rank's peak (max_memory_allocated over two steps) must be within 15% of the advisor's estimate
for N=2, made from a FakeTensorMode trace of the unsharded step, and its losses equal the CPU's.
Synchronous execution, as in tests/device/test_memory_advisor.py: in async mode blocks freed
while queued work may still use them stay cached, which the estimates do not count."""

import gc

import pytest
import torch
import torch.distributed as dist
from dist_world import World

D, L, B = 256, 4, 512  # 8 MiB of fp32 parameters (2 MiB a block), ~20 MiB of activations
TOLERANCE = 0.15  # the bound for every suggestion's estimate


@pytest.fixture(scope="module")
def world():
    with pytest.MonkeyPatch.context() as env:
        env.setenv("NEURON_EAGER_MODE", "sync")  # the ranks read it when they start
        started = World(2)
    with started as w:
        yield w


def build(device) -> torch.nn.Module:
    with torch.device(device):
        return torch.nn.Sequential(*[torch.nn.Sequential(
            torch.nn.Linear(D, 4 * D), torch.nn.GELU(), torch.nn.Linear(4 * D, D))
            for _ in range(L)])


def make_step(model, x):
    opt = torch.optim.Adam(model.parameters())
    losses = []

    def step():
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return step, opt, losses


def inputs():
    torch.manual_seed(0)
    return build("cpu").state_dict(), torch.randn(B, D)


def estimated_and_measured_peak():
    """On each rank: the advisor's estimate for FSDP2 over the world's ranks, then the step run
    sharded (two steps), its peak and its losses."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.fsdp import fully_shard

    from torchneuron.device.memory_advice import fsdp_peak
    from torchneuron.device.memory_breakdown import measure_step

    device = torch.device("neuron", torch.neuron.current_device())
    with FakeTensorMode():
        fake = build(device)
        step, opt, _ = make_step(fake, torch.randn(B, D, device=device))
        mem = measure_step(step, fake, opt, device=device)
    estimate = fsdp_peak(mem, dist.get_world_size())
    del fake, step, opt
    gc.collect()
    torch.neuron.empty_cache()

    state, x = inputs()
    model = build("cpu")
    model.load_state_dict(state)
    model.to(device)
    for block in model:
        fully_shard(block)
    fully_shard(model)
    x = x.to(device)
    torch.neuron.synchronize()
    torch.neuron.empty_cache()
    torch.neuron.reset_peak_memory_stats()
    step, _, losses = make_step(model, x)
    step()
    step()
    torch.neuron.synchronize()
    return estimate, torch.neuron.max_memory_allocated(), [v.item() for v in losses]


def test_the_fsdp2_estimate_matches_a_sharded_run(world):
    state, x = inputs()
    model = build("cpu")
    model.load_state_dict(state)
    step, _, cpu_losses = make_step(model, x)
    step()
    step()
    for estimate, peak, losses in world.run(estimated_and_measured_peak):
        # Both ranks run the same batch: the averaged gradient is the one-process gradient.
        torch.testing.assert_close(torch.tensor(losses), torch.stack(cpu_losses))
        assert abs(peak - estimate) <= TOLERANCE * estimate, (
            f"FSDP2 over 2 ranks: estimated {estimate / 2**20:.2f} MiB, measured "
            f"{peak / 2**20:.2f} MiB")
