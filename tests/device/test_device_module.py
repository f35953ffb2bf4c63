"""torch.neuron answers the torch.cuda API, and torch.accelerator routes to it."""

import threading

import pytest
import torch
from torchneuron._C import runtime as _runtime_c

MiB = 1 << 20


def test_devices_and_properties():
    assert torch.neuron.is_available() and torch.neuron.device_count() == 4
    props = torch.neuron.get_device_properties(0)
    assert props.total_memory == 24 << 30 and props.logical_nc_config == 2
    assert props.peak_bf16_flops > 0 and props.memory_bandwidth > 0
    assert "trn2" in torch.neuron.get_device_name(1)
    assert torch.neuron.current_device() == 0


def test_set_device_and_context_managers():
    with torch.neuron.device(2):
        assert torch.neuron.current_device() == 2
        assert torch.ones(1, device="neuron").device == torch.device("neuron", 2)
    assert torch.neuron.current_device() == 0
    t = torch.ones(1, device="neuron:3")
    with torch.neuron.device_of(t):
        assert torch.neuron.current_device() == 3
    torch.neuron.set_device("neuron:1")
    try:
        assert torch.accelerator.current_device_index() == 1
    finally:
        torch.neuron.set_device(0)


def test_current_device_is_per_thread():
    seen = {}

    def worker():
        seen["before"] = torch.neuron.current_device()
        torch.neuron.set_device(3)
        seen["after"] = torch.neuron.current_device()

    torch.neuron.set_device(1)
    try:
        th = threading.Thread(target=worker)
        th.start()
        th.join()
        assert seen == {"before": 0, "after": 3}
        assert torch.neuron.current_device() == 1
    finally:
        torch.neuron.set_device(0)


def test_tensors_stay_on_their_device_and_move_between_devices():
    a = torch.randn(4, 4)
    t1 = a.to("neuron:1")
    out = (t1 @ t1).relu().sum(0)
    assert out.device == torch.device("neuron", 1)
    t2 = out.to("neuron:2")
    assert t2.device == torch.device("neuron", 2)
    torch.testing.assert_close(t2.cpu(), (a @ a).relu().sum(0))


def test_four_threads_compute_correctly_at_once():
    torch.manual_seed(0)
    inputs = [torch.randn(64, 64) for _ in range(4)]
    results, errors = [None] * 4, []

    def worker(i):
        try:
            torch.neuron.set_device(i)
            x = inputs[i].neuron()
            acc = torch.zeros(64, 64, device="neuron")
            for _ in range(50):
                acc = acc + torch.tanh(x @ x) / 50
            results[i] = acc.cpu()
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    for i in range(4):
        expected = torch.zeros(64, 64)
        for _ in range(50):
            expected = expected + torch.tanh(inputs[i] @ inputs[i]) / 50
        torch.testing.assert_close(results[i], expected)


# ------------------------------------------------------------------ memory

def test_memory_allocated_moves_by_rounded_bytes_and_back():
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    t = torch.empty(1000, dtype=torch.uint8, device="neuron")  # rounds up to 1024
    assert torch.neuron.memory_allocated() - base == 1024
    assert torch.accelerator.memory_allocated() == torch.neuron.memory_allocated()
    u = torch.empty(3 * MiB + 1, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_allocated() - base == 1024 + 3 * MiB + 512
    del t, u
    assert torch.neuron.memory_allocated() == base


def test_memory_stats_match_what_the_allocator_holds():
    torch.neuron.empty_cache()
    torch.neuron.reset_peak_memory_stats()
    base_alloc = torch.neuron.memory_allocated()
    t = torch.empty(2 * MiB, dtype=torch.uint8, device="neuron")
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes.all.current"] == base_alloc + 2 * MiB
    assert stats["allocated_bytes.large_pool.current"] >= 2 * MiB
    assert stats["num_ooms"] == 0 and "num_alloc_retries" in stats
    held = sum(b["size"] for b in torch.neuron.memory_snapshot() if b["device"] == 0)
    assert held == torch.neuron.memory_reserved()
    del t
    assert torch.neuron.memory_reserved() >= 2 * MiB  # cached, not returned
    assert torch.neuron.max_memory_allocated() >= base_alloc + 2 * MiB
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() == torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()
    torch.neuron.reset_accumulated_memory_stats()
    assert torch.neuron.memory_stats()["allocated_bytes.all.allocated"] == 0


def test_mem_get_info_against_capacity(python):
    # A device smaller than the host's free memory: free is the device's, and moves with use.
    code = ("import torch\n"
            "free, total = torch.neuron.mem_get_info()\n"
            "assert total == torch.neuron.get_device_properties(0).total_memory == 1 << 30\n"
            "assert free == total and not torch.neuron.get_device_properties(0).host_memory_limited\n"
            "t = torch.empty(8 << 20, dtype=torch.uint8, device='neuron')\n"
            "free2, _ = torch.neuron.mem_get_info()\n"
            "print(free - free2 >= 8 << 20)\n")
    out = python(code, env={"NEURON_HBM_BYTES": "1GiB"})
    assert out.stdout.strip() == "True", out.stderr


def test_mem_get_info_free_is_what_the_host_can_back():
    free, total = torch.neuron.mem_get_info()
    in_use = torch.neuron.memory_reserved()
    assert free <= total - in_use
    assert free <= _runtime_c.backing_memory_available() + (64 << 20)  # the host, give or
    # take what other processes did between the two reads


def test_memory_summary_is_a_readable_table():
    s = torch.neuron.memory_summary()
    assert "neuron memory summary" in s and "Allocated memory" in s and "Reserved memory" in s


def test_per_process_memory_fraction_limits_and_recovers():
    torch.neuron.empty_cache()
    torch.neuron.set_per_process_memory_fraction(0.001, 1)  # ~24.6 MiB of 24 GiB
    try:
        a = torch.empty(16 * MiB, dtype=torch.uint8, device="neuron:1")
        with pytest.raises(torch.OutOfMemoryError, match="set_per_process_memory_fraction"):
            torch.empty(16 * MiB, dtype=torch.uint8, device="neuron:1")
        del a
        b = torch.empty(16 * MiB, dtype=torch.uint8, device="neuron:1")
        del b
    finally:
        torch.neuron.set_per_process_memory_fraction(1.0, 1)
    with pytest.raises(ValueError, match="fraction"):
        torch.neuron.set_per_process_memory_fraction(1.5)


# ------------------------------------------------------------------ streams and events

def test_streams_and_events():
    s = torch.neuron.Stream()
    assert isinstance(s, torch.neuron.Stream) and isinstance(s, torch.Stream)
    assert s != torch.neuron.current_stream()
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        x = torch.randn(32, 32, device="neuron")
        y = x @ x
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    z = y.relu()
    end.record()
    end.synchronize()
    assert start.query() and end.query() and start.elapsed_time(end) >= 0
    torch.neuron.current_stream().wait_stream(s)
    z.record_stream(s)
    torch.neuron.synchronize()
    torch.testing.assert_close(z.cpu(), (x.cpu() @ x.cpu()).relu())


def test_generic_stream_and_event():
    s = torch.Stream(device="neuron")
    e = torch.Event(device="neuron")
    e.record(s)
    s.wait_event(e)
    s.synchronize()
    assert s.query() and e.query()


def test_event_errors():
    a = torch.neuron.Event()
    b = torch.neuron.Event()
    a.record()
    b.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        a.elapsed_time(b)
    e = torch.Event(device="neuron:0")
    e.record(torch.Stream(device="neuron:0"))
    with pytest.raises(RuntimeError, match="does not match recording stream's device"):
        e.record(torch.Stream(device="neuron:1"))


# ------------------------------------------------------------------ RNG

def test_seed_reproduces_and_state_replays():
    torch.manual_seed(7)
    a = torch.randn(5, device="neuron")
    torch.manual_seed(7)
    b = torch.randn(5, device="neuron")
    torch.testing.assert_close(a.cpu(), b.cpu())
    state = torch.neuron.get_rng_state()
    c = torch.rand(5, device="neuron")
    torch.neuron.set_rng_state(state)
    torch.testing.assert_close(torch.rand(5, device="neuron").cpu(), c.cpu())
    torch.neuron.manual_seed_all(3)
    assert torch.neuron.initial_seed() == 3
    states = torch.neuron.get_rng_state_all()
    assert len(states) == torch.neuron.device_count()
    d = torch.randn(3, device="neuron:2")
    torch.neuron.set_rng_state_all(states)
    torch.testing.assert_close(torch.randn(3, device="neuron:2").cpu(), d.cpu())
    torch.neuron.seed()
    assert torch.neuron.initial_seed() != 3


def test_generator_object_and_fork_rng():
    g = torch.Generator(device="neuron").manual_seed(11)
    assert g.device == torch.device("neuron", 0)
    x = torch.randn(4, device="neuron", generator=g)
    g.manual_seed(11)
    torch.testing.assert_close(torch.randn(4, device="neuron", generator=g).cpu(), x.cpu())
    torch.manual_seed(5)
    with torch.random.fork_rng(device_type="neuron", devices=[0]):
        torch.randn(10, device="neuron")
    after = torch.randn(3, device="neuron")
    torch.manual_seed(5)
    torch.testing.assert_close(torch.randn(3, device="neuron").cpu(), after.cpu())


def test_dropout_draws_from_the_neuron_generator():
    torch.manual_seed(1)
    m1 = torch.nn.functional.dropout(torch.ones(1000, device="neuron"), 0.5)
    torch.manual_seed(1)
    m2 = torch.nn.functional.dropout(torch.ones(1000, device="neuron"), 0.5)
    torch.testing.assert_close(m1.cpu(), m2.cpu())
    kept = (m1.cpu() != 0).float().mean().item()
    assert 0.4 < kept < 0.6 and set(m1.cpu().unique().tolist()) <= {0.0, 2.0}


# ------------------------------------------------------------------ profiler

def test_profiler_records_neuron_ops_and_memory(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                 record_shapes=True, profile_memory=True) as prof:
        a = torch.randn(64, 64, device="neuron")
        b = (a @ a).relu()
    table = prof.key_averages(group_by_input_shape=True).table(row_limit=50)
    assert "aten::mm" in table and "[64, 64]" in table and "NEURON Mem" in table
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    import json

    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "aten::mm" for e in events)
    assert any(e.get("name") == "[memory]" for e in events)
    del b


def test_backward_runs_on_the_calling_thread_with_cpu_results():
    threads = []
    x_cpu = torch.randn(4, 3, requires_grad=True)
    x = x_cpu.detach().neuron().requires_grad_()
    y = (x * 2).tanh()
    y.register_hook(lambda g: threads.append(threading.get_ident()))
    y.sum().backward()
    (x_cpu * 2).tanh().sum().backward()
    assert threads == [threading.get_ident()]
    torch.testing.assert_close(x.grad.cpu(), x_cpu.grad)
