"""Process safety (docs/semantics.md): neuron ops never change process-wide state,
fork behaves as CUDA's (a child of an initialized parent is refused the device, never
deadlocked), neuron tensors sent between processes fail fast instead of hanging, every device
index is validated the same way, and host memory that cannot back an allocation is an
OutOfMemoryError, not the kernel's OOM killer."""

import multiprocessing
import os
import queue
import textwrap
import threading

import pytest
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------- process-wide settings


def global_settings() -> dict:
    return {
        "mkldnn.enabled": torch.backends.mkldnn.enabled,
        "mkldnn.matmul.fp32_precision": torch.backends.mkldnn.matmul.fp32_precision,
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "fill_uninitialized_memory": torch.utils.deterministic.fill_uninitialized_memory,
        "default_dtype": torch.get_default_dtype(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "num_threads": torch.get_num_threads(),
        "grad_enabled": torch.is_grad_enabled(),
        "cudnn.enabled": torch.backends.cudnn.enabled,
        "anomaly": torch.is_anomaly_enabled(),
    }


def _op_sample():
    """(name, op, CPU inputs): ops whose CPU kernels branch on the device or call oneDNN:
    reduced-precision products, attention, convolutions, norms, losses."""
    g = torch.Generator().manual_seed(0)

    def r(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=g).to(dtype)

    bf16, f16 = torch.bfloat16, torch.float16
    yield "bmm bf16", torch.bmm, (r(2, 64, 64, dtype=bf16), r(2, 64, 64, dtype=bf16))
    yield "bmm fp16", torch.bmm, (r(2, 64, 64, dtype=f16), r(2, 64, 64, dtype=f16))
    yield "mm bf16", torch.mm, (r(128, 64, dtype=bf16), r(64, 128, dtype=bf16))
    yield "addmm fp16", torch.addmm, (r(64, dtype=f16), r(64, 64, dtype=f16),
                                      r(64, 64, dtype=f16))
    yield "baddbmm bf16", torch.baddbmm, (r(2, 32, 32, dtype=bf16), r(2, 32, 64, dtype=bf16),
                                          r(2, 64, 32, dtype=bf16))
    yield "linear bf16", F.linear, (r(8, 64, dtype=bf16), r(32, 64, dtype=bf16))
    yield "conv2d bf16", F.conv2d, (r(1, 3, 16, 16, dtype=bf16), r(8, 3, 3, 3, dtype=bf16))
    yield "conv2d f32", F.conv2d, (r(1, 3, 16, 16), r(8, 3, 3, 3))
    yield "layer_norm bf16", lambda x: F.layer_norm(x, (64,)), (r(4, 64, dtype=bf16),)
    yield "softmax f16", lambda x: F.softmax(x, -1), (r(4, 64, dtype=f16),)
    yield "sdpa bf16", F.scaled_dot_product_attention, tuple(
        r(1, 2, 16, 32, dtype=bf16) for _ in range(3))
    yield "cross_entropy", F.cross_entropy, (r(8, 10), torch.arange(8).remainder(10))
    yield "matmul int64", torch.matmul, (torch.arange(16).view(4, 4),
                                         torch.arange(16).view(4, 4))


def _mha_under_autocast(device):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(64, 4, batch_first=True).to(device)
    x = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(1)).to(device)
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        out, _ = mha(x, x, x)
    return out


def test_neuron_ops_change_no_global_setting():
    before = global_settings()
    for name, op, inputs in _op_sample():
        expected = op(*inputs)
        actual = op(*(t.to("neuron") for t in inputs))
        torch.testing.assert_close(actual.cpu(), expected, msg=name)
        assert global_settings() == before, f"{name} changed a process-wide setting"
    torch.testing.assert_close(_mha_under_autocast("neuron").cpu(), _mha_under_autocast("cpu"))
    assert global_settings() == before, "MultiheadAttention under autocast changed a setting"


def test_bf16_bmm_keeps_onednn_for_cpu_convolutions():
    # The audit's case: after a bfloat16 bmm on neuron, CPU convolutions still run on oneDNN.
    a = torch.randn(2, 64, 64, dtype=torch.bfloat16)
    b = torch.randn(2, 64, 64, dtype=torch.bfloat16)
    torch.testing.assert_close(torch.bmm(a.to("neuron"), b.to("neuron")).cpu(), torch.bmm(a, b))
    assert torch.backends.mkldnn.enabled


# ------------------------------------------------------------------------------- fork

FORK_SCRIPT = textwrap.dedent("""
    import os, sys, threading, time
    import torch
    INITIALIZE = {initialize}
    if INITIALIZE:
        keep = torch.ones(4, device="neuron")
    print("parent initialized", torch.neuron.is_initialized(), flush=True)
    pid = os.fork()
    if pid == 0:
        try:
            assert torch.neuron._is_in_bad_fork() == INITIALIZE
            torch.manual_seed(0)                      # seeds neuron only where it may
            print("cpu", (torch.ones(3) * 2).sum().item(), flush=True)
            print("device count", torch.neuron.device_count(), flush=True)
            x = torch.ones(3, device="neuron") * 2
            print("neuron", x.sum().item(), flush=True)
        except RuntimeError as e:
            print("error:", e, flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("child exit", os.waitstatus_to_exitcode(status), flush=True)
""")


def test_child_of_initialized_parent_is_refused_with_the_cure(python):
    out = python(FORK_SCRIPT.format(initialize=True))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "parent initialized True"
    assert "cpu 6.0" in lines and "device count 4" in lines
    error = next(line for line in lines if line.startswith("error:"))
    assert "Cannot re-initialize neuron in forked subprocess" in error
    assert "'spawn'" in error and "'forkserver'" in error
    assert "child exit 0" in lines


def test_child_of_uninitialized_parent_uses_neuron(python):
    out = python(FORK_SCRIPT.format(initialize=False))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "parent initialized False"
    assert "neuron 6.0" in lines and not any(line.startswith("error:") for line in lines)


def test_fork_while_another_thread_allocates_never_deadlocks(python):
    # The audit saw 2-3 of 60 children hang on the allocator lock. Each child frees a neuron
    # tensor it inherited (the allocator's lock) and exits; all must finish.
    script = textwrap.dedent("""
        import os, threading, time, torch
        stop = False
        def churn():
            while not stop:
                xs = [torch.empty(1024 * (i + 1), device="neuron") for i in range(16)]
                del xs
                torch.neuron.empty_cache()
        churner = threading.Thread(target=churn, daemon=True)
        churner.start()
        time.sleep(0.1)
        inherited = torch.ones(1000, device="neuron")
        pids = []
        for _ in range(60):
            pid = os.fork()
            if pid == 0:
                global_tensor = inherited
                del inherited, global_tensor   # frees through the allocator's lock
                os._exit(0)
            pids.append(pid)
        deadline = time.time() + 60
        done = 0
        while pids and time.time() < deadline:
            for pid in list(pids):
                finished, status = os.waitpid(pid, os.WNOHANG)
                if finished:
                    pids.remove(pid)
                    done += 1
            time.sleep(0.01)
        for pid in pids:
            os.kill(pid, 9)
        stop = True
        # Join before exit: a daemon thread still inside a torch call when the interpreter
        # finalizes is ended by pthread_exit, which C++ noexcept frames turn into
        # std::terminate (CPython behaviour, the same on the CPU).
        churner.join(30)
        print("finished", done, "hung", len(pids))
    """)
    out = python(script, timeout=180)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "finished 60 hung 0"


# ----------------------------------------------------------- tensors between processes

def _put_neuron_tensor(q, received):
    q.put(torch.ones(3, device="neuron"))
    # As with CPU tensors (file-descriptor strategy), the sender stays alive until the receiver
    # has the tensor: the memory's descriptor is fetched from the sender while unpickling.
    received.wait(120)


@pytest.mark.ipc
def test_queue_of_neuron_tensor_from_a_spawned_producer_arrives():
    # Sharing itself (both ways, memory, dying processes) is tests/device/test_ipc.py's.
    ctx = multiprocessing.get_context("spawn")
    q, received = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_put_neuron_tensor, args=(q, received))
    p.start()
    got = q.get(timeout=120)
    received.set()
    assert got.device.type == "neuron"
    assert torch.equal(got.cpu(), torch.ones(3))
    p.join(60)
    assert p.exitcode == 0


class _NeuronDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.full((2,), float(i), device="neuron")


@pytest.mark.parametrize("parent_initialized", [True, False])
def test_fork_dataloader_returning_neuron_tensors_raises_in_main(parent_initialized):
    if parent_initialized:
        torch.ones(1, device="neuron")
    loader = torch.utils.data.DataLoader(_NeuronDataset(), num_workers=1,
                                         multiprocessing_context="fork", timeout=120)
    result: dict = {}

    def consume():
        try:
            result["batches"] = [b.reshape(-1, 2)[0].cpu() for b in loader]
        except RuntimeError as e:
            result["error"] = str(e)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    t.join(150)
    assert not t.is_alive(), "the DataLoader hung"
    # A parent that initialized neuron (here, or in other tests of this process) has its
    # worker refused the device, at once; a worker forked from a parent that never did may use
    # neuron and share its tensors, as CUDA's may.
    if torch.neuron.is_initialized() and parent_initialized:
        assert "forked subprocess" in result.get("error", ""), result
    else:
        assert "forked subprocess" in result.get("error", "") or \
            [b.tolist() for b in result["batches"]] == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0],
                                                         [3.0, 3.0]], result


# ------------------------------------------------------------------------ device indices

BAD_INDEX = [100, 256, 257, -2]

# Every torch.neuron entry point that takes a device index.
NEURON_CALLS = {
    "set_device": lambda i: torch.neuron.set_device(i),
    "current_stream": lambda i: torch.neuron.current_stream(i),
    "default_stream": lambda i: torch.neuron.default_stream(i),
    "Stream": lambda i: torch.neuron.Stream(device=i),
    "device": lambda i: torch.neuron.device(i).__enter__(),
    "memory_allocated": lambda i: torch.neuron.memory_allocated(i),
    "memory_stats": lambda i: torch.neuron.memory_stats(i),
    "mem_get_info": lambda i: torch.neuron.mem_get_info(i),
    "memory_summary": lambda i: torch.neuron.memory_summary(i),
    "empty_cache_fraction": lambda i: torch.neuron.set_per_process_memory_fraction(0.5, i),
    "get_device_name": lambda i: torch.neuron.get_device_name(i),
    "get_device_properties": lambda i: torch.neuron.get_device_properties(i),
    "get_rng_state": lambda i: torch.neuron.get_rng_state(i),
    "synchronize": lambda i: torch.neuron.synchronize(i),
}


@pytest.mark.parametrize("index", BAD_INDEX)
@pytest.mark.parametrize("name", sorted(NEURON_CALLS))
def test_every_entry_point_validates_the_index_the_same_way(name, index):
    torch.neuron.set_device(0)
    with pytest.raises(IndexError, match=rf"neuron: invalid device index {index}; there are 4 "):
        NEURON_CALLS[name](index)
    assert torch.neuron.current_device() == 0  # nothing selected neuron:1 by wrapping


@pytest.mark.parametrize("call", [
    lambda i: torch.accelerator.current_stream(i),
    lambda i: torch.accelerator.set_device_index(i),
    lambda i: torch.empty(1, device=torch.device("neuron", i)),
    lambda i: torch.Stream(device=torch.device("neuron", i)),
], ids=["accelerator.current_stream", "accelerator.set_device_index", "empty", "torch.Stream"])
@pytest.mark.parametrize("index", [100, 127])
def test_device_generic_entry_points_reach_the_same_check(call, index):
    # Indices past 127 never reach a backend: PyTorch's own argument parsing holds device
    # indices in 8 bits and refuses them, for CUDA as for neuron.
    torch.neuron.set_device(0)
    with pytest.raises(IndexError, match=rf"neuron: invalid device index {index}; there are 4 "):
        call(index)
    assert torch.neuron.current_device() == 0


def test_out_of_range_index_names_the_valid_range():
    with pytest.raises(IndexError, match=r"invalid device index 257; there are 4 neuron devices "
                                         r"\(neuron:0 \.\. neuron:3\)"):
        torch.neuron.set_device(257)


# ---------------------------------------------------------------------------- host memory

def test_allocation_the_host_cannot_back_is_an_out_of_memory_error(python):
    # Devices configured larger than the host: an allocation that fits the device but not the
    # host's available memory raises (naming both figures) instead of getting the process killed.
    code = textwrap.dedent("""
        import torch
        total = torch.neuron.get_device_properties(0).total_memory
        host, reported_total = torch.neuron.mem_get_info(0)   # free: what the host can back
        assert reported_total == total > host, (total, host)
        try:
            torch.empty(host + (1 << 30), dtype=torch.uint8, device="neuron")
            print("NO ERROR")
        except torch.OutOfMemoryError as e:
            print("OOM:", e)
        x = torch.ones(1 << 20, device="neuron")      # the device still works
        torch.testing.assert_close(x.sum().cpu(), torch.tensor(float(1 << 20)))
        print("summary mentions host:", "host memory" in torch.neuron.memory_summary())
        print("exceeds:", torch.neuron.get_device_properties(0).host_memory_limited)
    """)
    out = python(code, env={"NEURON_HBM_BYTES": "1TiB"}, timeout=120)
    assert out.returncode == 0, out.stderr
    oom = next(line for line in out.stdout.splitlines() if line.startswith("OOM:"))
    assert "host memory that backs" in oom and "available" in oom and "1024.00 GiB" in oom
    assert "summary mentions host: True" in out.stdout
    assert "exceeds: True" in out.stdout
