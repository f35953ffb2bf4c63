"""The same checks with 4 processes (the default device count), where a ring has more than one
hop and subgroups can leave ranks out: collectives, DDP and FSDP2 against one CPU process."""

import pytest
import torch
import torch.distributed as dist
from test_dist_parallel import batches, ddp_body, fsdp_body, make_mlp, train_reference

pytestmark = pytest.mark.slow
WORLD_SIZE = 4  # the `world` fixture (conftest.py) starts this many ranks


def collectives_body():
    rank, device = dist.get_rank(), torch.device("neuron", torch.neuron.current_device())
    t = torch.full((3,), float(rank + 1), device=device)
    dist.all_reduce(t)
    # rank r sends r+1 elements (value 10r+j) to rank j; receives j+1 from each rank j.
    inp = torch.cat([torch.full((rank + 1,), 10.0 * rank + j) for j in range(4)]).to(device)
    out = torch.empty(sum(j + 1 for j in range(4)), device=device)
    dist.all_to_all_single(out, inp, [j + 1 for j in range(4)], [rank + 1] * 4)
    evens, odds = dist.new_group([0, 2]), dist.new_group([1, 3])
    u = torch.full((2,), float(rank), device=device)
    dist.all_reduce(u, group=evens if rank % 2 == 0 else odds)
    return t.cpu(), out.cpu(), u.cpu()


def test_collectives(world):
    for rank, (t, out, u) in enumerate(world.run(collectives_body)):
        torch.testing.assert_close(t, torch.full((3,), 10.0))
        expected = torch.cat([torch.full((j + 1,), 10.0 * j + rank) for j in range(4)])
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(u, torch.full((2,), float(2 * (rank % 2) + 2)))


def test_ddp(world):
    ref_losses, ref_state = train_reference(make_mlp(), batches())
    for losses, state, _ in world.run(ddp_body, 1, 25):
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses))
        for k, v in ref_state.items():
            torch.testing.assert_close(state[k], v, msg=k)


@pytest.mark.parametrize("mixed", [False, True], ids=["fp32", "bf16-mixed-precision"])
def test_fsdp2(world, mixed):
    ref_losses, ref_state = train_reference(make_mlp(), batches())
    tol = dict(rtol=2e-2, atol=2e-2) if mixed else {}
    for losses, state, _ in world.run(fsdp_body, mixed):
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), **tol)
        for k, v in ref_state.items():
            torch.testing.assert_close(state[k], v, msg=k, **tol)
