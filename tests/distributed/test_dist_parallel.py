"""PyTorch's parallelism APIs on neuron over 2 processes of the `neuron` backend, each checked
against the same training run in this (single, CPU) process: DDP (with no_sync and several
gradient buckets), FSDP2 (fp32 and bf16 mixed precision), DTensor tensor parallelism on a
transformer MLP, functional collectives, and distributed checkpointing."""

import pytest
import torch
import torch.distributed as dist

STEPS = 3
BATCH, DIM, HIDDEN = 8, 16, 32


def device():
    return torch.device("neuron", torch.neuron.current_device())


def make_mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(DIM, HIDDEN), torch.nn.GELU(),
                               torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU(),
                               torch.nn.Linear(HIDDEN, 1))


def batches(n=STEPS):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(BATCH, DIM, generator=g), torch.randn(BATCH, 1, generator=g))
            for _ in range(n)]


def shard(t, rank):
    return t.chunk(dist.get_world_size())[rank]


def train_reference(model, data, accumulate=1, dtype=None):
    """One process, CPU: the run the distributed ones must reproduce."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for i in range(0, len(data), accumulate):
        opt.zero_grad()
        for x, y in data[i:i + accumulate]:
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            losses.append(loss.item())
        opt.step()
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


# ----------------------------------------------------------------------------------------- DDP

def ddp_body(accumulate, bucket_cap_mb):
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = dist.get_rank()
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    model = DDP(make_mlp().to(device()), bucket_cap_mb=bucket_cap_mb)
    buckets = []

    def counting_allreduce(group, bucket):  # PyTorch's own hook, counting the buckets
        buckets.append(bucket.index())
        return default_hooks.allreduce_hook(group, bucket)

    model.register_comm_hook(None, counting_allreduce)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    data = batches(2 * STEPS if accumulate > 1 else STEPS)
    for i in range(0, len(data), accumulate):
        opt.zero_grad()
        for j, (x, y) in enumerate(data[i:i + accumulate]):
            x, y = shard(x, rank).to(device()), shard(y, rank).to(device())
            last = j == accumulate - 1
            ctx = model.no_sync() if not last else _nullcontext()
            with ctx:
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
            if not last:  # no_sync: the gradient stays this rank's own until the last step
                losses.append(("local", loss.item()))
            loss_sum = loss.detach().clone()
            dist.all_reduce(loss_sum)
            losses.append(loss_sum.item() / dist.get_world_size())
        opt.step()
    # DDP rebuilds its buckets after the first step, in the order gradients became ready.
    buckets = max(buckets) + 1
    state = {k.removeprefix("module."): v.cpu() for k, v in model.state_dict().items()}
    return [x for x in losses if not isinstance(x, tuple)], state, buckets


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("accumulate,bucket_cap_mb", [(1, 25), (2, 0.001)],
                         ids=["one-bucket", "no_sync-many-buckets"])
def test_ddp_matches_one_process(world, accumulate, bucket_cap_mb):
    data = batches(2 * STEPS if accumulate > 1 else STEPS)
    ref_losses, ref_state = train_reference(make_mlp(), data, accumulate)
    results = world.run(ddp_body, accumulate, bucket_cap_mb)
    for losses, state, buckets in results:
        # Each rank's loss is over half the batch; their mean is the full batch's loss.
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses))
        for k, v in ref_state.items():
            torch.testing.assert_close(state[k], v, msg=k)
        assert buckets > 1 if bucket_cap_mb < 1 else buckets == 1


# --------------------------------------------------------------------------------------- FSDP2

def fsdp_body(mixed: bool):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    rank = dist.get_rank()
    model = make_mlp().to(device())
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
        if mixed else MixedPrecisionPolicy()
    for layer in (model[0], model[2], model[4]):
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in batches():
        opt.zero_grad()
        out = model(shard(x, rank).to(device()))
        loss = torch.nn.functional.mse_loss(out.float(), shard(y, rank).to(device()))
        loss.backward()
        opt.step()
        loss_sum = loss.detach().clone()
        dist.all_reduce(loss_sum)
        losses.append(loss_sum.item() / dist.get_world_size())
    local_device = str(next(model.parameters()).to_local().device)
    state = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}
    return losses, state, local_device


@pytest.mark.parametrize("mixed", [False, True], ids=["fp32", "bf16-mixed-precision"])
def test_fsdp2_matches_one_process(world, mixed):
    ref_losses, ref_state = train_reference(make_mlp(), batches())
    # bf16 parameters in forward/backward; fp32 sharded parameters and gradient reduction.
    tol = dict(rtol=2e-2, atol=2e-2) if mixed else {}
    for r, (losses, state, local_device) in enumerate(world.run(fsdp_body, mixed)):
        assert local_device == f"neuron:{r}"
        torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref_losses), **tol)
        for k, v in ref_state.items():
            torch.testing.assert_close(state[k], v, msg=k, **tol)


# ------------------------------------------------------------------------------ tensor parallel

class FeedForward(torch.nn.Module):
    """A transformer block's MLP, as in Llama: w2(silu(w1 x) * w3 x)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.w1 = torch.nn.Linear(DIM, HIDDEN, bias=False)
        self.w3 = torch.nn.Linear(DIM, HIDDEN, bias=False)
        self.w2 = torch.nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x):
        return self.w2(torch.nn.functional.silu(self.w1(x)) * self.w3(x))


def tp_data():
    g = torch.Generator().manual_seed(2)
    return [torch.randn(BATCH, 4, DIM, generator=g) for _ in range(STEPS)]


def tp_body():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    mesh = init_device_mesh("neuron", (2,))
    model = parallelize_module(FeedForward().to(device()), mesh,
                               {"w1": ColwiseParallel(), "w3": ColwiseParallel(),
                                "w2": RowwiseParallel()})
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    outs = []
    for x in tp_data():  # every rank sees the whole batch; the weights are split
        opt.zero_grad()
        out = model(x.to(device()))
        out.pow(2).mean().backward()
        opt.step()
        outs.append(out.detach().cpu())
    local = model.w1.weight.to_local()
    state = {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}
    return outs, state, tuple(local.shape), str(local.device)


def test_tensor_parallel_mlp_matches_one_process(world):
    model = FeedForward()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_outs = []
    for x in tp_data():
        opt.zero_grad()
        out = model(x)
        out.pow(2).mean().backward()
        opt.step()
        ref_outs.append(out.detach())
    for r, (outs, state, local_shape, local_device) in enumerate(world.run(tp_body)):
        assert local_shape == (HIDDEN // 2, DIM) and local_device == f"neuron:{r}"
        for out, ref in zip(outs, ref_outs):
            torch.testing.assert_close(out, ref)
        for k, v in model.state_dict().items():
            torch.testing.assert_close(state[k], v, msg=k)


# ------------------------------------------------------------------------ functional collectives

def funcol_body(on_neuron: bool):
    import torch.distributed._functional_collectives as funcol

    dev = device() if on_neuron else torch.device("cpu")
    rank = dist.get_rank()
    group = dist.group.WORLD
    t = torch.arange(8.0, device=dev) + 10 * rank
    reduced = funcol.all_reduce(t, "sum", group)
    gathered = funcol.all_gather_tensor(t, 0, group)
    scattered = funcol.reduce_scatter_tensor(t, "sum", 0, group)
    swapped = funcol.all_to_all_single(t, output_split_sizes=[3, 4] if rank == 0 else [5, 4],
                                       input_split_sizes=[3, 5] if rank == 0 else [4, 4],
                                       group=group)
    many = funcol.all_reduce_coalesced([t, t * 2], "max", group)
    results = [reduced, gathered, scattered, swapped, *many]
    results = [funcol.wait_tensor(x) for x in results]
    return [x.cpu() for x in results], [str(x.device) for x in results]


def test_functional_collectives(world):
    for r, (neuron, cpu) in enumerate(zip(world.run(funcol_body, True),
                                          world.run(funcol_body, False))):
        assert neuron[1] == [f"neuron:{r}"] * len(neuron[1])
        for n, c in zip(neuron[0], cpu[0]):
            torch.testing.assert_close(n, c, rtol=0, atol=0)
        base = torch.arange(8.0)
        torch.testing.assert_close(neuron[0][0], 2 * base + 10)
        torch.testing.assert_close(neuron[0][1], torch.cat([base, base + 10]))
        torch.testing.assert_close(neuron[0][2], (2 * base + 10)[4 * r:4 * r + 4])


# ------------------------------------------------------------------------ distributed checkpoint

def dcp_save_body(path):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import fully_shard

    model = make_mlp().to(device())
    fully_shard(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    rank = dist.get_rank()
    x, y = batches(1)[0]
    torch.nn.functional.mse_loss(model(shard(x, rank).to(device())),
                                 shard(y, rank).to(device())).backward()
    opt.step()
    dcp.save({"model": model.state_dict()}, checkpoint_id=path)
    return {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}


def dcp_load_body(path):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(123)  # different weights until the load
    model = torch.nn.Sequential(torch.nn.Linear(DIM, HIDDEN), torch.nn.GELU(),
                                torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU(),
                                torch.nn.Linear(HIDDEN, 1)).to(device())
    fully_shard(model)
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=path)
    model.load_state_dict(state["model"])
    local = {k: str(v.to_local().device) for k, v in model.state_dict().items()}
    return {k: v.full_tensor().cpu() for k, v in model.state_dict().items()}, local


def test_distributed_checkpoint_round_trip_is_bit_exact(world, tmp_path):
    saved = world.run(dcp_save_body, str(tmp_path / "ckpt"))
    # The trained state the two ranks hold must be the one-process CPU training's.
    ref = make_mlp()
    x, y = batches(1)[0]
    opt = torch.optim.Adam(ref.parameters(), lr=0.1)
    torch.nn.functional.mse_loss(ref(x), y).backward()
    opt.step()
    for k, v in ref.state_dict().items():
        torch.testing.assert_close(saved[0][k], v, msg=k)
    for r, (loaded, local) in enumerate(world.run(dcp_load_body, str(tmp_path / "ckpt"))):
        assert set(local.values()) == {f"neuron:{r}"}
        for k, v in saved[0].items():
            assert torch.equal(loaded[k], v), k


# ------------------------------------------------------------------------------- DTensor random

def dtensor_random_body():
    """DTensor random ops as TorchTitan's sharded init and a TP model's dropout use them."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("neuron", (2,))
    torch.manual_seed(0)  # every rank seeds alike, as DTensor asks
    sharded = distribute_tensor(torch.zeros(4, 4, device=device()), mesh, [Shard(0)])
    sharded.normal_()
    after_sharded = torch.neuron.get_rng_state()
    replicated = distribute_tensor(torch.zeros(4, 4, device=device()), mesh, [Replicate()])
    replicated.uniform_()
    ones = distribute_tensor(torch.ones(8, 8, device=device()), mesh, [Shard(0)])
    dropped = torch.nn.functional.dropout(ones, 0.5)
    # DTensor's contract: shard r is drawn at offset r * (shard size), and every rank moves on
    # to offset (whole tensor size) afterwards. The same draw without DTensor, on this rank:
    g = torch.Generator(device=device()).manual_seed(0)
    g.set_offset(dist.get_rank() * 8)
    plain_shard = torch.empty(2, 4, device=device()).normal_(generator=g)
    return (sharded.full_tensor().cpu(), sharded.to_local().cpu(), plain_shard.cpu(),
            after_sharded, replicated.to_local().cpu(), dropped.full_tensor().cpu(),
            torch.neuron.get_rng_state())


def test_dtensor_random_ops(world):
    ranks = world.run(dtensor_random_body)
    (full, _, _, after, rep, drop, state), other = ranks[0], ranks[1]
    # sharded init: ranks hold different shards, each the stream at its DTensor offset
    assert full.shape == (4, 4) and not torch.isclose(full[:2], full[2:]).any()
    torch.testing.assert_close(other[0], full, rtol=0, atol=0)
    for local, plain in ((ranks[0][1], ranks[0][2]), (ranks[1][1], ranks[1][2])):
        torch.testing.assert_close(local, plain, rtol=0, atol=0)
    assert after[8:].view(torch.int64).item() == 16  # offset past the whole 4x4 tensor
    # replicated: the same values on every rank
    torch.testing.assert_close(other[4], rep, rtol=0, atol=0)
    assert ((rep >= 0) & (rep < 1)).all() and rep.unique().numel() == 16
    # dropout on a sharded DTensor: the CPU's scaling, different masks per shard
    assert set(drop.unique().tolist()) <= {0.0, 2.0} and 0.2 < (drop != 0).float().mean() < 0.8
    torch.testing.assert_close(drop, torch.ones(8, 8) * (drop != 0) * 2.0)
    assert not torch.equal(drop[:4] != 0, drop[4:] != 0)
    # the generators stay in step across ranks
    assert torch.equal(state, other[6]) and torch.equal(after, other[3])
