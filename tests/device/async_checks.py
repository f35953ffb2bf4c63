"""Checks of asynchronous execution (NEURON_EAGER_MODE=async), run in one process that
test_async_execution.py starts with the mode set: `python async_checks.py` prints one JSON line
per check ({"name", "ok", "error"}). Each check compares with the CPU."""

from __future__ import annotations

import json
import sys
import time
import traceback

import torch
import torchneuron  # noqa: F401
from torchneuron._C import aten as _aten_c
from torchneuron._C import device as _device_c
from torchneuron._C import launch as _launch_c

BIG = 768  # a matmul this size takes milliseconds: long enough to observe the queue
BUSY_NS = 100_000_000  # 0.1 s of queued spinning after them


def queued_work():
    """Work that keeps the device busy for a while (queued last, so that it is still running when
    this returns), and its CPU result."""
    x = torch.randn(BIG, BIG)
    ref = x @ x @ x
    xn = x.to("neuron")
    y = xn @ xn @ xn
    # And then a spin (torch.cuda._sleep's twin): the checks look at the device right after
    # queuing, and a busy machine may stall this thread past a few matmuls.
    torch.neuron._sleep(BUSY_NS)
    return y, ref


def check_mode_is_async():
    assert torchneuron.runtime.execution.mode() == "async"


def check_sleep_keeps_the_device_busy_until_it_ends():
    torch.neuron.synchronize()
    torch.neuron._sleep(300_000_000)
    assert not _launch_c.device_idle(), "the queued spin was not pending"
    torch.neuron.synchronize()
    assert _launch_c.device_idle()


def check_call_returns_before_the_kernel_ran():
    x = torch.randn(BIG, BIG)
    xn = x.to("neuron")
    torch.neuron.synchronize()
    t0 = time.perf_counter()
    ys = [xn @ xn for _ in range(4)]
    issued = time.perf_counter() - t0
    busy = not _launch_c.device_idle()
    torch.neuron.synchronize()
    total = time.perf_counter() - t0
    assert busy, "the device was idle right after queuing four matmuls"
    assert issued < total, (issued, total)
    for y in ys:
        torch.testing.assert_close(y.cpu(), x @ x)


def check_results_equal_cpu_through_a_chain():
    a = torch.randn(300, 400)
    b = torch.randn(400, 200)
    an, bn = a.to("neuron"), b.to("neuron")
    out = torch.relu(an @ bn + 1).softmax(-1).sum(0)
    ref = torch.relu(a @ b + 1).softmax(-1).sum(0)
    torch.testing.assert_close(out.cpu(), ref)


def check_in_place_chain_keeps_order():
    a = torch.zeros(200_000, device="neuron")
    for i in range(20):
        a.mul_(2).add_(i)
    ref = torch.zeros(200_000)
    for i in range(20):
        ref.mul_(2).add_(i)
    torch.testing.assert_close(a.cpu(), ref)


def check_data_dependent_ops_synchronize():
    y, ref = queued_work()
    mask = y > 0
    torch.testing.assert_close(torch.nonzero(mask).cpu(), torch.nonzero(ref > 0))
    torch.testing.assert_close(y[mask].cpu(), ref[ref > 0])
    torch.testing.assert_close(torch.unique((y > 0).int()).cpu(), torch.unique((ref > 0).int()))


def check_small_op_on_idle_device_runs_inline():
    x = torch.randn(16, device="neuron")
    torch.neuron.synchronize()
    y = x + x
    assert _launch_c.device_idle(), "a 16-element add on an idle device was queued"
    torch.testing.assert_close(y.sum().item(), (x.cpu() * 2).sum().item())


def check_synchronization_points():
    for point in ("item", "cpu", "tolist", "str", "synchronize", "event", "stream",
                  "accelerator"):
        y, ref = queued_work()
        if point == "item":
            torch.testing.assert_close(y[3, 4].item(), ref[3, 4].item())
        elif point == "cpu":
            torch.testing.assert_close(y.cpu(), ref)
        elif point == "tolist":
            torch.testing.assert_close(torch.tensor(y[0].tolist()), ref[0])
        elif point == "str":
            assert "tensor(" in str(y)
        elif point == "synchronize":
            torch.neuron.synchronize()
        elif point == "event":
            e = torch.neuron.Event()
            e.record()
            e.synchronize()
            assert e.query()
        elif point == "stream":
            torch.neuron.current_stream().synchronize()
        elif point == "accelerator":
            torch.accelerator.synchronize()
        # An event's own marker may still be retiring; the work before it is done.
        assert point == "event" or _launch_c.device_idle(), f"{point}: work still queued after it"
        torch.testing.assert_close(y.cpu(), ref)


def check_streams_are_queues_ordered_by_wait_stream():
    x = torch.randn(BIG, BIG)
    xn = x.to("neuron")
    side = torch.neuron.Stream()
    main = torch.neuron.current_stream()
    torch.neuron.synchronize()
    with torch.neuron.stream(side):
        y = xn @ xn  # queued on the side stream
    main.wait_stream(side)
    z = y + 1  # on the main stream, after the side stream's matmul
    torch.testing.assert_close(z.cpu(), x @ x + 1)


def check_wait_event_orders_streams():
    x = torch.randn(BIG, BIG)
    xn = x.to("neuron")
    side = torch.neuron.Stream()
    done = torch.neuron.Event()
    y = xn @ xn
    done.record()
    side.wait_event(done)
    with torch.neuron.stream(side):
        z = y * 3
    side.synchronize()
    torch.testing.assert_close(z.cpu(), (x @ x) * 3)


def check_error_in_a_kernel_surfaces_at_the_next_synchronization():
    x = torch.randn(1000, 8, device="neuron")
    bad = torch.tensor([0, 5000], device="neuron")  # (a copy from pageable memory synchronizes)
    good = torch.tensor([0, 1], device="neuron")
    queued_work()
    torch.index_select(x, 0, good)  # a signature's first queued call runs at once (DeferredOp.h)
    y, _ = queued_work()  # so that the faulty op is queued, not run inline
    r = torch.index_select(x, 0, bad)  # returns: the index is checked inside the kernel
    try:
        torch.neuron.synchronize()
    except IndexError as e:
        assert "index_select" in str(e) and "index out of range" in str(e), str(e)
    else:
        raise AssertionError("the kernel's IndexError did not surface at synchronize()")
    torch.neuron.synchronize()  # raised once
    later = x[:2] * 2  # later work still runs
    torch.testing.assert_close(later.cpu(), x.cpu()[:2] * 2)
    del r, y


def check_checks_before_a_kernel_raise_at_the_call():
    y, _ = queued_work()
    a = torch.randn(3, 4, device="neuron")
    b = torch.randn(5, 6, device="neuron")
    cpu_error = None
    try:
        torch.randn(3, 4) @ torch.randn(5, 6)
    except RuntimeError as e:
        cpu_error = str(e)
    try:
        a @ b
    except RuntimeError as e:
        assert str(e) == cpu_error, (str(e), cpu_error)
    else:
        raise AssertionError("a shape error did not raise at the call")
    torch.neuron.synchronize()
    del y


def check_memory_statistics_exact_after_synchronize():
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    x = torch.randn(512, 512, device="neuron")
    ys = [x @ x for _ in range(3)]
    del ys, x
    torch.neuron.synchronize()
    assert torch.neuron.memory_allocated() == base, (torch.neuron.memory_allocated(), base)


def timed_matmuls(count):
    """Events around `count` queued matmuls (tens of milliseconds of device work)."""
    x = torch.randn(BIG, BIG, device="neuron")
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    for _ in range(count):
        x = x @ x / BIG
    end.record()
    return start, end


def check_events_time_device_work():
    start, end = timed_matmuls(3)
    end.synchronize()
    assert start.elapsed_time(end) > 0


def check_elapsed_time_before_completion_raises():
    start, end = timed_matmuls(4)
    assert not end.query(), "four queued matmuls completed before the next line ran"
    try:
        start.elapsed_time(end)
    except RuntimeError as e:
        assert "completed" in str(e), str(e)
    else:
        raise AssertionError("elapsed_time on an incomplete event did not raise")
    end.synchronize()
    assert start.elapsed_time(end) > 0


def check_pinned_non_blocking_copy_is_queued_pageable_is_synchronous():
    y, ref = queued_work()
    host = torch.empty(BIG, BIG, pin_memory=True)
    host.copy_(y, non_blocking=True)
    torch.neuron.synchronize()
    torch.testing.assert_close(host, ref)
    y, ref = queued_work()
    pageable = torch.empty(BIG, BIG)
    pageable.copy_(y, non_blocking=True)  # into pageable memory: synchronous, as on CUDA
    torch.testing.assert_close(pageable, ref)
    y, ref = queued_work()
    pinned = y.to("cpu", non_blocking=True)  # PyTorch pins the result: queued, as on CUDA
    torch.neuron.synchronize()
    assert pinned.is_pinned()
    torch.testing.assert_close(pinned, ref)
    src = torch.randn(BIG, BIG).pin_memory()
    dst = torch.empty(BIG, BIG, device="neuron")
    y, _ = queued_work()
    dst.copy_(src, non_blocking=True)
    torch.testing.assert_close(dst.cpu(), src)


def check_training_step_equals_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(),
                                torch.nn.Linear(256, 10))
    ref = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(),
                              torch.nn.Linear(256, 10))
    ref.load_state_dict(model.state_dict())
    model.to("neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    x = torch.randn(128, 64)
    t = torch.randint(0, 10, (128,))
    for _ in range(3):
        for m, o, xx, tt in ((model, opt, x.to("neuron"), t.to("neuron")), (ref, ref_opt, x, t)):
            o.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(xx), tt)
            loss.backward()
            o.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.cpu(), q, rtol=1e-4, atol=1e-5)


def check_compiled_graph_equals_cpu():
    def f(a, b):
        return torch.relu(a @ b + 1).sum(-1)

    a, b = torch.randn(256, 256), torch.randn(256, 256)
    compiled = torch.compile(f, backend="neuron")
    y, _ = queued_work()  # queued eager work before the graph
    out = compiled(a.to("neuron"), b.to("neuron"))
    torch.testing.assert_close(out.cpu(), f(a, b), rtol=1e-4, atol=1e-4)
    del y


def check_compiled_graph_is_one_queued_item():
    def f(a):
        return (torch.sin(a) * 3 + torch.cos(a)).sum(0)

    a = torch.randn(1500, 1500)
    compiled = torch.compile(f, backend="neuron")
    an = a.to("neuron")
    compiled(an)  # compiles now; later calls only launch
    torch.neuron.synchronize()
    y, ref = queued_work()
    out, busy, back, spin_s = on_a_busy_device(lambda: compiled(an))
    torch.testing.assert_close(out.cpu(), f(a), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(y.cpu(), ref, rtol=1e-4, atol=1e-2)
    assert busy, (f"a compiled graph's call waited for the work queued before it (back {back:.3f} "
                  f"s into a {spin_s} s spin)")


def check_copy_into_a_strided_view_is_queued():
    y, ref = queued_work()

    def copy_into_a_strided_view():
        out = torch.zeros(BIG, 2 * BIG, device="neuron")
        out[:, 1::2].copy_(y)  # a strided, non-dense destination (what a slice's backward fills)
        return out

    out, busy, back, spin_s = on_a_busy_device(copy_into_a_strided_view)
    expected = torch.zeros(BIG, 2 * BIG)
    expected[:, 1::2].copy_(ref)
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-2)
    assert busy, (f"the copy into a strided view waited for the work queued before it (back "
                  f"{back:.3f} s into a {spin_s} s spin)")
    # An overlapping destination still raises the CPU's error at the call.
    try:
        torch.zeros(1, device="neuron").expand(4).copy_(torch.ones(4, device="neuron"))
    except RuntimeError as e:
        assert "unsupported operation" in str(e), e
    else:
        raise AssertionError("a copy into an expanded tensor did not raise")


def check_an_op_that_sizes_an_empty_out_is_queued():
    # abs is a composite that passes at::empty({0}) to abs.out: the out gets its memory at the
    # call and the kernel is queued (it waited for the queue before). The first two calls of a
    # signature run at the call (meta, then the CPU kernel's check of it).
    for call in range(4):
        y, ref = queued_work()
        given = torch.empty(0, device="neuron")
        got = (torch.abs(y), torch.abs(-y, out=given), torch.abs(y[:, 0].to(torch.complex64)))
        busy = not _launch_c.device_idle()
        expected = (ref.abs(), ref.neg().abs(), ref[:, 0].to(torch.complex64).abs())
        for g, e in zip(got, expected):
            torch.testing.assert_close(g.cpu(), e, rtol=1e-4, atol=1e-2)
        assert got[1] is given and given.shape == ref.shape, given.shape
        if call >= 2:
            assert busy, "abs waited for the work queued before it"
    # An out of the wrong dtype is still refused at the call with the CPU's error.
    try:
        torch.abs(torch.randn(4, device="neuron"), out=torch.empty(0, dtype=torch.long,
                                                                    device="neuron"))
    except RuntimeError as e:
        cpu = None
        try:
            torch.abs(torch.randn(4), out=torch.empty(0, dtype=torch.long))
        except RuntimeError as c:
            cpu = str(c)
        assert str(e) == cpu, (str(e), cpu)
    else:
        raise AssertionError("abs into a long out did not raise")


def check_a_float_that_changes_every_call_does_not_synchronize():
    # An optimizer's step size or a scheduled learning rate is a new float at every step. Each
    # call with a new value used to be the first of its signature, which runs at the call after
    # the queue drains; a pointwise op's recipe now serves every value.
    p, g = torch.randn(256, 256), torch.randn(256, 256)
    pn, gn = p.to("neuron"), g.to("neuron")
    for step in range(1, 6):
        y, _ = queued_work()
        pn.add_(gn, alpha=-0.01 * step)
        pn.addcdiv_(gn, gn.abs() + 1.0, value=0.001 / step)
        pn.lerp_(gn, 0.1 * step)
        busy = not _launch_c.device_idle()
        p.add_(g, alpha=-0.01 * step)
        p.addcdiv_(g, g.abs() + 1.0, value=0.001 / step)
        p.lerp_(g, 0.1 * step)
        torch.testing.assert_close(pn.cpu(), p)
        if step >= 3:
            assert busy, f"step {step}: an op with a new float waited for the queued work"


def check_profiler_records_queued_kernels():
    x = torch.randn(BIG, BIG, device="neuron")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        y = x @ x + 1
        torch.neuron.synchronize()
    names = {e.name for e in prof.events()}
    assert any("mm" in n for n in names), sorted(names)[:20]
    del y


def check_waits_let_workers_release_python_objects():
    # The worker drops the last reference to a storage that has a Python object, which takes
    # the GIL, while this thread waits inside a call that holds it (a pybind11 binding).
    x = torch.randn(BIG, BIG, device="neuron")
    y = x @ x @ x
    storage = y.untyped_storage()
    del y, storage
    alias = _aten_c.cpu_alias(x)  # waits for the queued work first
    torch.testing.assert_close(alias, x.cpu())


def check_threads_see_their_own_streams():
    import threading

    x = torch.randn(BIG, BIG)
    results = {}

    def work(i):
        s = torch.neuron.Stream()
        with torch.neuron.stream(s):
            y = x.to("neuron") @ x.to("neuron") * i
            s.synchronize()
            results[i] = y.cpu()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(1, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(1, 4):
        torch.testing.assert_close(results[i], (x @ x) * i)


MAX_QUEUED = 1024  # csrc/runtime/Execution.h kMaxQueued, as CUDA's launch queue


def queue_once(ops):
    """Runs `ops` queued once and waits: an op's first queued call runs synchronously (its recipe
    is checked against the fallback), and on an idle device small ops run inline instead."""
    torch.neuron._sleep(1_000_000)
    ops()
    torch.neuron.synchronize()


# A check that needs the device busy while the host runs a loop queues a spin first; on a loaded
# host the caller may get no CPU until the spin has ended, and then every op rightly runs inline on
# the idle device. Such a round says nothing about queuing: it is run again behind a longer spin.
# A round whose first op came back while the spin was still running was decided on a busy device,
# so it must have queued.
SPINS_S = (0.3, 1.0, 3.0)


def on_a_busy_device(act):
    """act() right after a queued spin, run again behind a longer one (SPINS_S) while it came
    back only after its spin had ended. Returns act's result, whether the device was still busy
    when it returned, when it came back (seconds into the spin) and the spin's length. An act
    that waits for the device comes back after every spin, and then is not busy."""
    for spin_s in SPINS_S:
        torch.neuron._sleep(int(spin_s * 1e9))
        start = time.monotonic()
        result = act()
        busy = not _launch_c.device_idle()
        back = time.monotonic() - start
        if back < spin_s:
            break
    return result, busy, back, spin_s


def check_a_loop_without_synchronization_stays_a_bounded_queue_ahead():
    # Behind a spin every op queues; without a bound the loop would queue all 3,000 (each
    # holding its result's memory) and a training loop with no synchronization point would run
    # arbitrarily far ahead of the device.
    x = torch.randn(16)
    xn = x.to("neuron")
    queue_once(lambda: xn + 1)
    added = 0
    for spin_s in SPINS_S:
        torch.neuron._sleep(int(spin_s * 1e9))
        spin_start = time.monotonic()
        most, first_back = 0, None
        for _ in range(3000):
            xn = xn + 1
            first_back = first_back or time.monotonic() - spin_start
            most = max(most, _launch_c.queued_items())
        added += 3000
        if first_back < spin_s:
            break
    # (Whether the loop ends ahead of the device depends on the machine: once the worker catches
    # up, an op on the idle device runs inline.)
    torch.testing.assert_close(xn.cpu(), x + added)
    assert MAX_QUEUED - 50 <= most <= MAX_QUEUED, (
        f"at most {most} items queued; the loop's first op came back {first_back:.3f} s into a "
        f"{spin_s} s spin")
    assert _launch_c.queued_items() == 0


def check_threads_waiting_for_room_all_finish():
    # Two threads fill the queue behind a spin: each waits for room outside the GIL, so the
    # other (and the worker) can go on.
    import threading

    starts = {i: torch.full((16,), float(i), device="neuron") for i in (1, 2)}
    # Each op of the chain warmed on a busy device: after the first op's warm-up call waits for
    # the device, the second would run inline on the idle device and never be learned.
    queue_once(lambda: starts[1] * 1.0)
    queue_once(lambda: starts[1] + 1)
    for spin_s in SPINS_S:
        torch.neuron._sleep(int(spin_s * 1e9))
        spin_start = time.monotonic()
        results, most, first_back = {}, {}, {}

        def work(i):
            y = starts[i]
            most[i] = 0
            for _ in range(1500):
                y = y * 1.0 + 1
                first_back.setdefault(i, time.monotonic() - spin_start)
                most[i] = max(most[i], _launch_c.queued_items())
            results[i] = y.cpu()

        threads = [threading.Thread(target=work, args=(i,)) for i in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a thread waiting for room never finished"
        if min(first_back.values()) < spin_s:
            break
    assert max(most.values()) >= MAX_QUEUED - 50, (
        f"the queue never filled: {most}; the threads' first ops came back {first_back} s into "
        f"a {spin_s} s spin")
    assert max(most.values()) <= MAX_QUEUED + 1, most  # +1: the other thread's op in between
    for i in (1, 2):
        torch.testing.assert_close(results[i], torch.full((16,), float(i) + 1500))


MIB = 1 << 20


def check_a_loop_queued_ahead_reuses_the_memory_it_frees():
    """Memory the program frees while queued work still uses it goes back to the allocator at once
    (stream-ordered, as on CUDA): a loop queued far ahead of the device holds a few of its
    intermediates, not all of them (before: every queued op kept its inputs and results)."""
    x = torch.randn(4 * MIB // 4)  # 4 MiB
    xn = x.to("neuron")
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    queued_work()  # the loop below is queued while the device is busy with this
    busy_bytes = torch.neuron.max_memory_allocated() - base
    y, ref = xn, x
    for _ in range(40):
        y = y * 1.0001 + 0.5
        ref = ref * 1.0001 + 0.5
    peak = torch.neuron.max_memory_allocated() - base - busy_bytes
    torch.testing.assert_close(y.cpu(), ref)
    assert peak <= 4 * 4 * MIB, f"the loop held {peak / MIB:.0f} MiB (sync mode: 8-12 MiB)"


def pending_block(elements):
    """A tensor of a size nothing else here uses, still read by queued work (behind a busy
    device) when the program frees it: returns that work's result, its CPU twin and where the
    freed memory was."""
    a = torch.randn(elements)
    an = a.to("neuron")
    # A signature's first call runs at the call, after the queue drained: these calls queue.
    (an * 2) + 1
    address = an.data_ptr()  # (data_ptr settles the device: taken before the work is queued)
    torch.neuron.synchronize()
    queued_work()
    b = an * 2  # queued: reads an's memory after the busy work
    del an
    assert not _launch_c.device_idle(), "the busy work finished before the checks could use it"
    return b, a * 2, address


def rounded(nbytes):
    """What the allocator holds for `nbytes` (whole blocks of _device_c.block_size() bytes)."""
    block = _device_c.block_size()
    return -(-nbytes // block) * block


def check_memory_freed_while_queued_goes_to_later_work_on_its_stream():
    b, ref, address = pending_block(1_000_003)
    before = torch.neuron.memory_allocated()  # the freed block no longer counts
    c = b + 1  # queued after b's op on the same stream: may take the freed memory at once
    assert torch.neuron.memory_allocated() == before + rounded(4 * 1_000_003)
    assert not _launch_c.device_idle()
    torch.testing.assert_close(b.cpu(), ref)
    assert c.data_ptr() == address, "later work on the stream did not reuse the freed block"
    torch.testing.assert_close(c.cpu(), ref + 1)


def check_memory_freed_while_queued_waits_for_other_streams():
    side = torch.neuron.Stream()
    with torch.neuron.stream(side):  # its signature's first call, which drains the queue
        torch.full((1_000_033,), 7.0, device="neuron")
    b, ref, address = pending_block(1_000_033)
    with torch.neuron.stream(side):
        c = torch.full((1_000_033,), 7.0, device="neuron")  # runs at once: the side is idle
    side.synchronize()
    torch.testing.assert_close(b.cpu(), ref)  # 14.0 everywhere had the side taken the memory
    assert bool((c == 7).all())
    assert c.data_ptr() != address, "another stream took memory queued work still reads"
    torch.neuron.synchronize()
    with torch.neuron.stream(side):  # once the work ran, the memory is anyone's
        d = torch.full((1_000_033,), 5.0, device="neuron")
    assert d.data_ptr() == address
    side.synchronize()


def check_empty_cache_releases_memory_freed_while_queued():
    b, ref, _ = pending_block(1_000_037)
    torch.neuron.empty_cache()  # waits for the queued work, then releases every cached block
    assert torch.neuron.memory_reserved() == torch.neuron.memory_allocated()
    torch.testing.assert_close(b.cpu(), ref)


CHECKS = {name[len("check_"):]: fn for name, fn in globals().items() if name.startswith("check_")}


def main(names):
    import faulthandler

    for name in names or CHECKS:
        faulthandler.dump_traceback_later(300, exit=True)  # a hang fails the run, with stacks
        try:
            CHECKS[name]()
            result = {"name": name, "ok": True, "error": ""}
        except Exception:  # noqa: BLE001 - reported to the test
            result = {"name": name, "ok": False, "error": traceback.format_exc()}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
