"""What goes wrong across processes fails clearly and in bounded time: a rank that dies or never
arrives, ranks that disagree on a collective, a tensor on another rank's device."""

import datetime
import os
import threading
import time

import pytest
import torch
import torch.distributed as dist
from dist_world import World, init_group

PG_TIMEOUT_S = 3.0


def my_device():
    return torch.device("neuron", torch.neuron.current_device())


def expect_error(fn):
    try:
        fn()
    except RuntimeError as e:
        return str(e)
    return None


# ------------------------------------------------------------------ disagreements (group survives)

def mismatched_shapes_body():
    t = torch.ones(4 if dist.get_rank() == 0 else 8, device=my_device())
    error = expect_error(lambda: dist.all_reduce(t))
    # Nothing was sent: the group is still usable.
    u = torch.ones(3, device=my_device())
    dist.all_reduce(u)
    return error, u.cpu()


def test_mismatched_shapes_fail_clearly_on_all_ranks(world):
    results = world.run(mismatched_shapes_body, timeout=60)
    for r, (error, after) in enumerate(results):
        assert error is not None and "mismatched collective c10d::allreduce_" in error
        assert f"rank {r} passes 1 tensor(s), first float32[{4 if r == 0 else 8}]" in error
        assert f"rank {1 - r} passes 1 tensor(s), first float32[{8 if r == 0 else 4}]" in error
        torch.testing.assert_close(after, torch.full((3,), 2.0))



def mismatched_async_body():
    """Outside a backward pass the check runs at the call; inside one (DDP's hooks) the call
    returns and the Work's wait() raises."""
    t = torch.ones(4 if dist.get_rank() == 0 else 8, device=my_device())
    at_call = expect_error(lambda: dist.all_reduce(t, async_op=True))
    works = []
    x = torch.ones(3, device=my_device(), requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: works.append(dist.all_reduce(t, async_op=True)))
    y.sum().backward()
    at_wait = expect_error(works[0].wait)
    u = torch.ones(3, device=my_device())
    dist.all_reduce(u, async_op=True).wait()
    return at_call, at_wait, u.cpu()


def test_mismatched_async_collective_fails_on_every_rank(world):
    for r, (at_call, at_wait, after) in enumerate(world.run(mismatched_async_body, timeout=60)):
        for error in (at_call, at_wait):
            assert error is not None and "mismatched collective c10d::allreduce_" in error
            assert f"rank {r} passes 1 tensor(s), first float32[{4 if r == 0 else 8}]" in error
        torch.testing.assert_close(after, torch.full((3,), 2.0))


def test_deferred_work_ops_refuse_other_works():
    gloo_like = torch._C._distributed_c10d._create_work_from_future(torch.futures.Future())
    with pytest.raises(RuntimeError, match="expected a Work made by torchneuron.deferred_work"):
        torch.ops.torchneuron.deferred_work_fail(gloo_like.boxed(), "x")

def mismatched_gather_body():
    n = 4 if dist.get_rank() == 0 else 2
    out = torch.empty(2 * n, device=my_device())
    return expect_error(lambda: dist.all_gather_into_tensor(out, torch.ones(n, device=my_device())))


def test_mismatched_all_gather_sizes(world):
    for error in world.run(mismatched_gather_body, timeout=60):
        assert "mismatched collective c10d::_allgather_base_" in error



def channel_body(bind_to):
    """A new group (so a new agreement channel), where rank 1 may be told to listen on an
    address it cannot bind: then every rank checks over gloo instead, and mismatches are still
    caught on both."""
    from torchneuron.distributed import agreement_channel

    group = dist.new_group([0, 1])
    if dist.get_rank() == 1 and bind_to is not None:
        agreement_channel._group_settings[group.group_name] = (bind_to, PG_TIMEOUT_S)
    t = torch.ones(4 if dist.get_rank() == 0 else 8, device=my_device())
    error = expect_error(lambda: dist.all_reduce(t, group=group))
    channel = agreement_channel.channel_for(group)
    u = torch.ones(3, device=my_device())
    dist.all_reduce(u, group=group)
    dist.destroy_process_group(group)
    return error, type(channel).__name__, u.cpu()


@pytest.mark.parametrize("bind_to, channel", [(None, "Channel"), ("192.0.2.1", "GlooExchange")])
def test_agreement_channel_or_gloo(world, bind_to, channel):
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: bind fails on rank 1 alone.
    for r, (error, made, after) in enumerate(world.run(channel_body, bind_to, timeout=60)):
        assert made == channel
        assert f"rank {r} passes 1 tensor(s), first float32[{4 if r == 0 else 8}]" in error
        torch.testing.assert_close(after, torch.full((3,), 2.0))

def different_collectives_body():
    t = torch.ones(4, device=my_device())
    if dist.get_rank() == 0:
        return expect_error(lambda: dist.all_reduce(t))
    return expect_error(lambda: dist.broadcast(t, src=0))


def test_different_collectives(world):
    e0, e1 = world.run(different_collectives_body, timeout=60)
    assert "rank 0 called c10d::allreduce_, rank 1 called c10d::broadcast_" in e0
    assert "rank 1 called c10d::broadcast_, rank 0 called c10d::allreduce_" in e1


def mismatched_splits_body():
    rank = dist.get_rank()
    inp = torch.ones(4, device=my_device())
    out = torch.empty(4, device=my_device())
    # rank 0 sends 1 element to rank 1, but rank 1 expects 2 from rank 0.
    in_splits, out_splits = ([3, 1], [3, 1]) if rank == 0 else ([2, 2], [2, 2])
    not_mirrored = expect_error(lambda: dist.all_to_all_single(out, inp, out_splits, in_splits))
    # rank 1's output splits add up to 5 rows for a 4-row tensor.
    in_splits, out_splits = ([2, 2], [2, 2]) if rank == 0 else ([2, 2], [2, 3])
    invalid = expect_error(lambda: dist.all_to_all_single(out, inp, out_splits, in_splits))
    return not_mirrored, invalid


def test_mismatched_all_to_all_splits(world):
    for not_mirrored, invalid in world.run(mismatched_splits_body, timeout=60):
        assert "rank 0 sends 1 elements to rank 1, which expects 2" in not_mirrored
        assert "rank 1's split sizes do not match its tensors" in invalid


def wrong_device_body():
    rank = dist.get_rank()
    dist.all_reduce(torch.ones(2, device=my_device()))  # this process's device: neuron:rank
    other = torch.ones(2, device=torch.device("neuron", 1 - rank))
    return expect_error(lambda: dist.all_reduce(other))


def test_tensor_on_another_ranks_device(world):
    for r, error in enumerate(world.run(wrong_device_body, timeout=60)):
        assert (f"got a tensor on neuron:{1 - r}, but this rank communicates on neuron:{r}"
                in error)


def mixed_devices_body():
    out = [torch.empty(2, device=my_device()), torch.empty(2)]
    return expect_error(lambda: dist.all_gather(out, torch.ones(2, device=my_device())))


def test_neuron_and_cpu_tensors_in_one_collective(world):
    for error in world.run(mixed_devices_body, timeout=60):
        assert "Expected all tensors to be on the same device" in error


def init_bound(rank, size, init_method, backend, pg_timeout_s):
    torch.neuron.set_device(rank)
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=size,
                            device_id=torch.device("neuron", rank),
                            timeout=datetime.timedelta(seconds=pg_timeout_s))


def bound_device_body():
    other = torch.ones(2, device=torch.device("neuron", 1 - dist.get_rank()))
    return expect_error(lambda: dist.all_reduce(other)), str(dist.group.WORLD.bound_device_id)


def test_tensor_off_the_bound_device_id():
    with World(2, setup=init_bound) as w:
        for r, (error, bound) in enumerate(w.run(bound_device_body, timeout=60)):
            assert bound == f"neuron:{r}"
            assert f"this rank communicates on neuron:{r} (init_process_group(device_id" in error


# ------------------------------------------------------------------ lost ranks (group is broken)

def dies_body():
    t = torch.ones(1 << 20, device=my_device())
    if dist.get_rank() == 1:
        threading.Timer(0.3, os._exit, args=(7,)).start()  # dies in the middle of the loop
    start = time.monotonic()
    error = None
    try:
        for _ in range(100000):
            dist.all_reduce(t)
    except RuntimeError as e:
        error = str(e)
    elapsed = time.monotonic() - start
    # The group is broken for good; later collectives say so at once instead of waiting.
    later = expect_error(lambda: dist.all_reduce(t))
    return error, elapsed, later


def test_rank_dying_mid_collective_fails_the_others():
    with World(2, pg_timeout_s=PG_TIMEOUT_S) as w:
        (status0, value0), (status1, exitcode) = w.run_each(dies_body, timeout=60)
        w.close(force=True)
    assert (status1, exitcode) == ("died", 7)
    assert status0 == "ok"
    error, elapsed, later = value0
    assert error is not None and ("Connection closed by peer" in error
                                  or "Connection reset by peer" in error), error
    assert elapsed < PG_TIMEOUT_S + 5
    assert later is not None and "peer" in later, later


def absent_body():
    if dist.get_rank() == 1:
        time.sleep(PG_TIMEOUT_S + 2)  # never joins the collective
        return None
    start = time.monotonic()
    error = expect_error(lambda: dist.all_reduce(torch.ones(4, device=my_device())))
    return error, time.monotonic() - start


def test_absent_rank_times_out():
    with World(2, pg_timeout_s=PG_TIMEOUT_S) as w:
        (error, elapsed), _ = w.run(absent_body, timeout=60)
        w.close(force=True)
    assert error is not None and f"Timed out waiting {int(PG_TIMEOUT_S * 1000)}ms" in error
    assert PG_TIMEOUT_S - 0.5 < elapsed < PG_TIMEOUT_S + 5


def test_shape_check_can_be_turned_off(python):
    # NEURON_DIST_CHECK=0 (for latency-bound programs) reaches the backend; bad values are refused.
    off = python("import torch, torchneuron.distributed.agreement as a; print(a.is_enabled())",
                 env={"NEURON_DIST_CHECK": "0"})
    assert off.stdout.strip() == "False", off.stderr
    # A bad value never breaks `import torch`; the first neuron call names it.
    bad = python("import torch; print('imported'); torch.neuron.device_count()",
                 env={"NEURON_DIST_CHECK": "maybe"})
    assert bad.stdout.strip() == "imported", bad.stderr
    assert bad.returncode != 0 and "NEURON_DIST_CHECK='maybe' is not valid" in bad.stderr
