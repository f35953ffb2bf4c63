"""Every c10d collective on neuron tensors, over 2 processes of the `neuron` backend. Each check
runs the collective twice on the same group, once on neuron tensors and once on CPU tensors
(gloo itself), and compares the two results, and both with the value the collective must give."""

import os
import time

import pytest
import torch
import torch.distributed as dist

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64]


def _on_both(body, *args):
    """body(device, *args) on neuron and on CPU; results as CPU tensors, neuron first."""
    out = []
    for device in (f"neuron:{torch.neuron.current_device()}", "cpu"):
        result = body(torch.device(device), *args)
        out.append(tuple(t.cpu() for t in result))
    return out


def _close(results, expected=None):
    for neuron, cpu in results:
        for n, c in zip(neuron, cpu):
            torch.testing.assert_close(n, c, rtol=0, atol=0)
        if expected is not None:
            for n, e in zip(neuron, expected):
                torch.testing.assert_close(n, e)


# ------------------------------------------------------------------------------------- bodies
# Each runs on every rank and returns the tensors it produced.

def _rank_tensor(device, shape=(4, 3), dtype=torch.float32):
    r = dist.get_rank()
    return (torch.arange(12, dtype=torch.float32).reshape(shape) + 10 * r + 1).to(dtype).to(device)


def all_reduce_body(device, op, dtype):
    t = _rank_tensor(device, dtype=dtype)
    dist.all_reduce(t, op=op)
    return (t,)


def all_reduce_async_body(device):
    t = _rank_tensor(device)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    return (t, torch.tensor(work.is_completed()))


def broadcast_body(device):
    t = _rank_tensor(device)
    dist.broadcast(t, src=1)
    return (t,)


def reduce_body(device):
    t = _rank_tensor(device)
    dist.reduce(t, dst=1, op=dist.ReduceOp.MAX)
    return (t,) if dist.get_rank() == 1 else ()


def all_gather_body(device):
    t = _rank_tensor(device)
    outs = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(outs, t)
    return tuple(outs)


def all_gather_into_tensor_body(device):
    t = _rank_tensor(device)
    out = torch.empty(2 * t.shape[0], *t.shape[1:], device=device)
    dist.all_gather_into_tensor(out, t)
    return (out,)


def reduce_scatter_body(device):
    r = dist.get_rank()
    inputs = [torch.full((3,), float(10 * r + i), device=device) for i in range(2)]
    out = torch.empty(3, device=device)
    dist.reduce_scatter(out, inputs)
    return (out,)


def reduce_scatter_tensor_body(device):
    t = _rank_tensor(device)
    out = torch.empty(2, 3, device=device)
    dist.reduce_scatter_tensor(out, t)
    return (out,)


def all_to_all_body(device):
    r = dist.get_rank()
    inputs = [torch.full((3,), float(10 * r + i), device=device) for i in range(2)]
    outs = [torch.empty(3, device=device) for _ in range(2)]
    dist.all_to_all(outs, inputs)
    return tuple(outs)


def all_to_all_single_uneven_body(device):
    # rank 0 sends 1 element to rank 0 and 3 to rank 1; rank 1 sends 2 and 1.
    r = dist.get_rank()
    in_splits = [[1, 3], [2, 1]][r]
    out_splits = [[1, 2], [3, 1]][r]
    inp = torch.arange(sum(in_splits), dtype=torch.float32, device=device) + 100 * r
    out = torch.empty(sum(out_splits), device=device)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    return (out,)


def gather_body(device):
    t = _rank_tensor(device)
    if dist.get_rank() == 0:
        outs = [torch.empty_like(t) for _ in range(2)]
        dist.gather(t, outs, dst=0)
        return tuple(outs)
    dist.gather(t, dst=0)
    return ()


def scatter_body(device):
    out = torch.empty(4, 3, device=device)
    if dist.get_rank() == 1:
        dist.scatter(out, [_rank_tensor(device) * (i + 2) for i in range(2)], src=1)
    else:
        dist.scatter(out, src=1)
    return (out,)


def send_recv_body(device):
    r = dist.get_rank()
    if r == 0:
        dist.send(_rank_tensor(device), dst=1)
        return ()
    t = torch.empty(4, 3, device=device)
    dist.recv(t, src=0)
    return (t,)


def isend_irecv_body(device):
    r = dist.get_rank()
    peer = 1 - r
    out = torch.empty(4, 3, device=device)
    reqs = [dist.isend(_rank_tensor(device), dst=peer), dist.irecv(out, src=peer)]
    for req in reqs:
        req.wait()
    return (out,)


def batch_isend_irecv_body(device):
    r = dist.get_rank()
    peer = 1 - r
    a, b = torch.empty(4, 3, device=device), torch.empty(2, device=device)
    ops = [dist.P2POp(dist.isend, _rank_tensor(device), peer),
           dist.P2POp(dist.isend, torch.full((2,), float(r), device=device), peer),
           dist.P2POp(dist.irecv, a, peer), dist.P2POp(dist.irecv, b, peer)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return (a, b)


def barrier_body(device):
    dist.barrier()
    dist.barrier(async_op=True).wait()
    return ()


def run_both(body, *args):
    return _on_both(body, *args)


def base(r):
    return torch.arange(12, dtype=torch.float32).reshape(4, 3) + 10 * r + 1


# -------------------------------------------------------------------------------------- tests

@pytest.mark.parametrize("op", ["SUM", "AVG", "PRODUCT", "MIN", "MAX"])
def test_all_reduce_ops(world, op):
    results = world.run(run_both, all_reduce_body, getattr(dist.ReduceOp, op), torch.float32)
    fn = {"SUM": torch.add, "AVG": lambda a, b: (a + b) / 2, "PRODUCT": torch.mul, "MIN": torch.minimum, "MAX": torch.maximum}[op]
    _close(results, expected=(fn(base(0), base(1)),))


@pytest.mark.parametrize("op", ["BAND", "BOR", "BXOR"])
def test_all_reduce_bitwise_ops(world, op):
    results = world.run(run_both, all_reduce_body, getattr(dist.ReduceOp, op), torch.int64)
    fn = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}[op]
    _close(results, expected=(fn(base(0).long(), base(1).long()),))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_reduce_dtypes(world, dtype):
    results = world.run(run_both, all_reduce_body, dist.ReduceOp.SUM, dtype)
    _close(results, expected=((base(0) + base(1)).to(dtype),))


def lambda_free_pair(body):
    return body(torch.device(f"neuron:{torch.neuron.current_device()}")), body(torch.device("cpu"))


def test_all_reduce_async_work_wait(world):
    results = world.run(run_both, all_reduce_async_body)
    _close(results, expected=(base(0) + base(1), torch.tensor(True)))


def work_results_body(device):
    """What an asynchronous collective's Work reports: the caller's tensors, on their device."""
    t = _rank_tensor(device)
    work = dist.all_reduce(t, async_op=True)
    fut_value = work.get_future().wait()
    work.wait()
    result = work.result()
    outs = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    gather_work = dist.all_gather(outs, t, async_op=True)
    gathered = gather_work.get_future().wait()
    doubled = dist.all_reduce(t.clone(), async_op=True).get_future().then(
        lambda fut: fut.value()[0] * 2).wait()  # a DDP-comm-hook-style chain
    peer = 1 - dist.get_rank()
    p2p = (dist.isend(t, peer) if dist.get_rank() == 0 else dist.irecv(torch.empty_like(t), peer))
    p2p.wait()
    same = [fut_value[0] is t, result[0] is t,
            all(a is b for a, b in zip(gathered, outs))]
    return (t, doubled, torch.tensor(same),
            torch.tensor([x.device == t.device for x in (*fut_value, *result, *gathered)]))


def test_async_work_reports_the_callers_tensors(world):
    results = world.run(run_both, work_results_body)
    total = base(0) + base(1)
    for (neuron, cpu) in results:
        torch.testing.assert_close(neuron[0], total)
        torch.testing.assert_close(neuron[1], 2 * (total + total))  # t was reduced again
        torch.testing.assert_close(neuron[1], cpu[1])
        assert neuron[2].all() and neuron[3].all(), (neuron[2], neuron[3])
        assert cpu[2].all() and cpu[3].all()  # what gloo does with CPU tensors



def async_in_order_body(device):
    """Asynchronous collectives, a synchronous one among them, waited on at the end: each must
    start in call order on every rank (on neuron they start on the group's sequencing thread)."""
    a, c, d = _rank_tensor(device), _rank_tensor(device) * 2, _rank_tensor(device) * 3
    b = _rank_tensor(device).flatten() + 100  # not a: it may not be read before a's wait()
    gathered = torch.empty(2 * b.numel(), device=device)
    works = [dist.all_reduce(a, async_op=True),
             dist.all_gather_into_tensor(gathered, b, async_op=True)]
    dist.broadcast(d, src=1)
    works.append(dist.all_reduce(c, op=dist.ReduceOp.MAX, async_op=True))
    for w in works:
        w.wait()
    return a, gathered, c, d


def test_async_collectives_start_in_call_order(world):
    _close(world.run(run_both, async_in_order_body))


def async_returns_early_body(flag):
    """An asynchronous collective issued by a backward pass (as DDP's gradient hooks issue them)
    returns before the other rank arrives, so the backward pass goes on, though on neuron the
    ranks must agree before gloo starts. Rank 1 starts its backward only once rank 0's call
    returned (a file says so), or after 30 s."""
    device = f"neuron:{torch.neuron.current_device()}"
    t = torch.ones(4, device=device)
    x = torch.ones(3, device=device, requires_grad=True)
    works = []

    def hook(grad):
        works.append(dist.all_reduce(t, async_op=True))
        if dist.get_rank() == 0:
            open(flag, "w").close()
        return grad

    y = x * 2
    y.register_hook(hook)
    if dist.get_rank() == 1:
        deadline = time.monotonic() + 30
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.01)
    returned_first = os.path.exists(flag)
    y.sum().backward()
    works[0].wait()
    return returned_first, t.cpu()


def test_async_collective_in_backward_returns_before_the_peer_arrives(world, tmp_path):
    (_, t0), (rank0_returned_first, t1) = world.run(async_returns_early_body,
                                                    str(tmp_path / "returned"))
    assert rank0_returned_first
    torch.testing.assert_close(t0, torch.full((4,), 2.0))
    torch.testing.assert_close(t1, torch.full((4,), 2.0))


def async_then_cpu_barrier_body(in_backward):
    """An asynchronous collective, then a barrier (on CPU tensors, which reach gloo directly)
    before the wait, on ranks that arrive at different times: gloo must see the two in the same
    order on both ranks."""
    device = f"neuron:{torch.neuron.current_device()}"
    t = torch.ones(1 << 16, device=device)
    works = []
    if in_backward:
        x = torch.ones(3, device=device, requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: works.append(dist.all_reduce(t, async_op=True)))
        y.sum().backward()
    else:
        works.append(dist.all_reduce(t, async_op=True))
    time.sleep(0.2 * dist.get_rank())
    dist.barrier()
    works[0].wait()
    return t[:4].cpu()


@pytest.mark.parametrize("in_backward", [False, True])
def test_async_collective_then_barrier(world, in_backward):
    for t in world.run(async_then_cpu_barrier_body, in_backward, timeout=60):
        torch.testing.assert_close(t, torch.full((4,), 2.0))

def test_broadcast(world):
    _close(world.run(run_both, broadcast_body), expected=(base(1),))


def test_reduce(world):
    results = world.run(run_both, reduce_body)
    _close(results)
    assert results[0] == [(), ()]
    torch.testing.assert_close(results[1][0][0], torch.maximum(base(0), base(1)))


def test_all_gather(world):
    _close(world.run(run_both, all_gather_body), expected=(base(0), base(1)))


def test_all_gather_into_tensor(world):
    _close(world.run(run_both, all_gather_into_tensor_body),
           expected=(torch.cat([base(0), base(1)]),))


def test_reduce_scatter(world):
    results = world.run(run_both, reduce_scatter_body)
    _close(results)
    for r, ((out,), _) in enumerate(results):
        torch.testing.assert_close(out, torch.full((3,), float(r + 10 + r)))


def test_reduce_scatter_tensor(world):
    total = base(0) + base(1)
    results = world.run(run_both, reduce_scatter_tensor_body)
    _close(results)
    for r, ((out,), _) in enumerate(results):
        torch.testing.assert_close(out, total[2 * r:2 * r + 2])


def premul_sum_body(device, factor):
    """NCCL's PREMUL_SUM(f) on neuron; gloo has none, so the CPU side reduces f * input with SUM."""
    t, full = _rank_tensor(device), _rank_tensor(device)
    out = torch.empty(2, 3, device=device)
    if device.type == "neuron":
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        dist.reduce_scatter_tensor(out, full, op=dist._make_nccl_premul_sum(factor))
    else:
        t.mul_(factor)
        dist.all_reduce(t)
        dist.reduce_scatter_tensor(out, full * factor)
    return t, out, full  # full: the reduce-scatter input, which must stay unscaled


def test_premul_sum_as_fsdp2_uses_it(world):
    factor = 0.375
    results = world.run(run_both, premul_sum_body, factor)
    _close(results)
    total = (base(0) + base(1)) * factor
    for r, ((t, out, full), _) in enumerate(results):
        torch.testing.assert_close(t, total)
        torch.testing.assert_close(out, total[2 * r:2 * r + 2])
        torch.testing.assert_close(full, base(r))


def premul_sum_unsupported_body():
    t = _rank_tensor(torch.device("neuron", torch.neuron.current_device()))
    dist.reduce(t, dst=0, op=dist._make_nccl_premul_sum(0.5))


def test_premul_sum_where_gloo_has_no_path_raises(world):
    with pytest.raises(Exception, match="Cannot use ReduceOp.PREMUL_SUM"):
        world.run(premul_sum_unsupported_body)


def test_all_to_all(world):
    results = world.run(run_both, all_to_all_body)
    _close(results)
    for r, (outs, _) in enumerate(results):
        for src, out in enumerate(outs):
            torch.testing.assert_close(out, torch.full((3,), float(10 * src + r)))


def test_all_to_all_single_uneven_splits(world):
    results = world.run(run_both, all_to_all_single_uneven_body)
    _close(results)
    torch.testing.assert_close(results[0][0][0], torch.tensor([0.0, 100.0, 101.0]))
    torch.testing.assert_close(results[1][0][0], torch.tensor([1.0, 2.0, 3.0, 102.0]))


def test_gather(world):
    results = world.run(run_both, gather_body)
    _close(results, expected=(base(0), base(1)))
    assert results[1] == [(), ()]


def test_scatter(world):
    results = world.run(run_both, scatter_body)
    _close(results)
    for r, ((out,), _) in enumerate(results):
        torch.testing.assert_close(out, base(1) * (r + 2))


def test_send_recv(world):
    results = world.run(run_both, send_recv_body)
    _close(results)
    torch.testing.assert_close(results[1][0][0], base(0))


def test_isend_irecv(world):
    results = world.run(run_both, isend_irecv_body)
    _close(results)
    torch.testing.assert_close(results[0][0][0], base(1))
    torch.testing.assert_close(results[1][0][0], base(0))


def test_batch_isend_irecv(world):
    results = world.run(run_both, batch_isend_irecv_body)
    _close(results)
    torch.testing.assert_close(results[0][0][1], torch.ones(2))
    torch.testing.assert_close(results[1][0][0], base(0))


def test_barrier(world):
    world.run(run_both, barrier_body)


def monitored_barrier_body():
    # PyTorch's dist.monitored_barrier accepts only groups whose backend is named "gloo";
    # torchneuron lets neuron groups through (their CPU backend is gloo), as the group's own
    # method always did. A late rank is named by both (test_dist_debug_modes.py).
    dist.group.WORLD.monitored_barrier()
    gloo = dist.new_group(backend="gloo")
    dist.monitored_barrier(gloo, wait_all_ranks=True)
    dist.monitored_barrier()
    dist.monitored_barrier(dist.new_group([0, 1]), wait_all_ranks=True)
    dist.destroy_process_group(gloo)
    return dist.get_backend()


def test_monitored_barrier(world):
    assert world.run(monitored_barrier_body) == ["neuron"] * 2


def cpu_and_object_body():
    objects = [None, None]
    dist.all_gather_object(objects, {"rank": dist.get_rank()})
    t = torch.ones(3)
    dist.all_reduce(t)
    return objects, t


def test_cpu_tensors_and_objects_on_the_neuron_group(world):
    for objects, t in world.run(cpu_and_object_body):
        assert objects == [{"rank": 0}, {"rank": 1}]
        torch.testing.assert_close(t, torch.full((3,), 2.0))


def zero_copy_body():
    # The collective writes straight into the neuron tensor's memory and allocates none.
    t = torch.ones(4096, device=torch.device("neuron", torch.neuron.current_device()))
    ptr = t.data_ptr()
    before = torch.neuron.memory_allocated()
    dist.all_reduce(t)
    return ptr == t.data_ptr(), torch.neuron.memory_allocated() - before, t.cpu()


def alias_release_thread_body():
    # Which thread frees the CPU aliases of synchronous collectives: gloo's worker thread would
    # need the GIL for it, which at interpreter exit aborts the process.
    import threading
    import weakref

    from torchneuron._C import aten as _aten_c
    from torchneuron.distributed import collectives

    freed_on = []
    make_alias = _aten_c.cpu_alias
    # The wait for gloo's worker to let go must end because it let go, not at its bound: with an
    # hour's bound, a wait that never saw it would outlast the world's timeout (it once ended
    # only at its 1 s bound, every collective).
    bound, collectives._LET_GO_WAIT_S = collectives._LET_GO_WAIT_S, 3600.0

    def traced_alias(t):
        alias = make_alias(t)
        weakref.finalize(alias, lambda: freed_on.append(threading.get_ident()))
        return alias

    _aten_c.cpu_alias = traced_alias
    try:
        t = torch.ones(1 << 16, device=torch.device("neuron", torch.neuron.current_device()))
        for _ in range(20):
            dist.all_reduce(t)
            dist.broadcast(t, src=0)
    finally:
        _aten_c.cpu_alias = make_alias
        collectives._LET_GO_WAIT_S = bound
    return freed_on.count(threading.get_ident()), len(freed_on), t.cpu()


def test_synchronous_collectives_free_their_aliases_on_the_calling_thread(world):
    for on_caller, freed, t in world.run(alias_release_thread_body):
        assert (on_caller, freed) == (40, 40)
        torch.testing.assert_close(t, torch.full((1 << 16,), 2.0 ** 20))


def test_zero_copy(world):
    for same_ptr, allocated, t in world.run(zero_copy_body):
        assert same_ptr and allocated == 0
        torch.testing.assert_close(t, torch.full((4096,), 2.0))


def non_contiguous_body(device):
    t = _rank_tensor(device).t()
    dist.all_reduce(t)
    return (t,)


def test_non_contiguous(world):
    _close(world.run(run_both, non_contiguous_body), expected=((base(0) + base(1)).t(),))


def subgroup_body(device):
    # Every rank creates every group, in the same order, as new_group requires.
    both = dist.new_group([0, 1])
    alone = [dist.new_group([0]), dist.new_group([1])][dist.get_rank()]
    t = _rank_tensor(device)
    dist.all_reduce(t, group=both)
    u = _rank_tensor(device)
    dist.all_reduce(u, group=alone)
    assert dist.get_backend(both) == "neuron"
    return (t, u)


def test_new_group(world):
    results = world.run(run_both, subgroup_body)
    _close(results)
    for r, ((t, u), _) in enumerate(results):
        torch.testing.assert_close(t, base(0) + base(1))
        torch.testing.assert_close(u, base(r))


def coalesced_body(device):
    a, b = _rank_tensor(device), torch.full((5,), float(dist.get_rank()), device=device)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    out = torch.empty(8, 3, device=device)
    outs = [[torch.empty(4, 3, device=device)] for _ in range(2)]  # [rank][input]
    dist.all_gather_coalesced(outs, [_rank_tensor(device)])
    with dist._coalescing_manager():
        dist.all_gather_into_tensor(out, _rank_tensor(device))
    return (a, b, out, outs[0][0], outs[1][0])


def test_coalesced(world):
    _close(world.run(run_both, coalesced_body),
           expected=(base(0) + base(1), torch.ones(5), torch.cat([base(0), base(1)]),
                     base(0), base(1)))


def device_mesh_body():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DeviceMesh, Shard, distribute_tensor

    mesh = init_device_mesh("neuron", (2,))
    same = DeviceMesh("neuron", [0, 1])
    full = torch.arange(8.0).reshape(4, 2)
    d = distribute_tensor(full.to("neuron"), mesh, [Shard(0)])
    local_device = d.to_local().device
    return (str(mesh.device_type), same.get_group().size(), str(local_device),
            d.full_tensor().cpu(), d.to_local().cpu())


def test_device_mesh(world):
    full = torch.arange(8.0).reshape(4, 2)
    for r, (kind, size, device, gathered, local) in enumerate(world.run(device_mesh_body)):
        assert (kind, size, device) == ("neuron", 2, f"neuron:{r}")
        torch.testing.assert_close(gathered, full)
        torch.testing.assert_close(local, full[2 * r:2 * r + 2])
