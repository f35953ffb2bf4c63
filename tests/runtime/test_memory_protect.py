"""The memory-protected runtime (NEURON_MEMORY_PROTECT=1, csrc/runtime/ProtectedMemory.h): device
memory is inaccessible to the host outside the seam's windows, so a read through a raw
`data_ptr()` stops the process with a message naming the address, its allocation and the mode,
while every op, copy and collective (through the seam) still computes what the CPU does. Each
case runs in a fresh process: the runtime is chosen once per process, before configuration."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from torchneuron.runtime import config

PROTECT = "NEURON_MEMORY_PROTECT"


def _run(body: str, protect: bool, *flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != PROTECT}
    if protect:
        env[PROTECT] = "1"
    return subprocess.run([sys.executable, *flags, "-c", textwrap.dedent(body)], env=env,
                          capture_output=True, text=True, timeout=300)


# A deliberate bypass of the seam: the bytes behind a neuron tensor's data_ptr(), read by ctypes.
RAW_READ = """
    import ctypes
    import torch
    x = torch.full((1024,), 2.5, device="neuron")
    print("value", ctypes.c_float.from_address(x.data_ptr()).value, flush=True)
"""


def test_a_raw_read_of_device_memory_stops_the_process_naming_address_allocation_and_mode():
    run = _run(RAW_READ, protect=True)
    assert run.returncode == -signal.SIGSEGV, run.stdout + run.stderr
    assert "value" not in run.stdout
    err = run.stderr
    assert "neuron: the host read device memory at 0x" in err, err
    assert "inside a device allocation of 4096 bytes at 0x" in err, err
    assert "(allocated at <string>:4)" in err, err  # the line of torch.full in the script
    assert "outside the runtime seam. Under NEURON_MEMORY_PROTECT=1" in err, err


def test_the_fault_chains_to_pythons_faulthandler_which_prints_the_python_stack():
    run = _run(RAW_READ, True, "-X", "faulthandler")
    assert run.returncode == -signal.SIGSEGV, run.stdout + run.stderr
    assert "neuron: the host read device memory at 0x" in run.stderr, run.stderr
    assert "Fatal Python error: Segmentation fault" in run.stderr, run.stderr
    assert 'File "<string>", line 5 in <module>' in run.stderr, run.stderr


def test_a_write_past_a_block_lands_in_the_page_behind_it_and_is_named_so():
    run = _run("""
        import ctypes
        import torch
        x = torch.ones(1024, device="neuron")  # one page, then a page no block holds
        ctypes.c_char.from_address(x.data_ptr() + 4096).value = b"x"
    """, protect=True)
    assert run.returncode == -signal.SIGSEGV, run.stdout + run.stderr
    assert "neuron: the host wrote device memory at 0x" in run.stderr, run.stderr
    assert "just past the end of a device allocation of 4096 bytes" in run.stderr, run.stderr


def test_the_default_runtime_is_unaffected_a_raw_read_sees_the_value():
    run = _run(RAW_READ + """
    from torchneuron._C import runtime as _runtime_c
    print("protected", _runtime_c.memory_protected())
    """, protect=False)
    assert run.returncode == 0, run.stderr
    assert "value 2.5" in run.stdout and "protected False" in run.stdout


def test_ops_copies_and_a_training_step_match_the_cpu_with_memory_protected():
    run = _run("""
        import torch
        from torchneuron._C import runtime as _runtime_c
        torch.manual_seed(0)
        a, b = torch.randn(8, 16), torch.randn(16, 4)
        x, y = a.to("neuron"), b.to("neuron")
        assert _runtime_c.memory_protected()
        assert torch.neuron.eager_mode() == "sync", torch.neuron.eager_mode()
        torch.testing.assert_close((x @ y).cpu(), a @ b)
        torch.testing.assert_close((x.sin() + 1).sum(0).cpu(), (a.sin() + 1).sum(0))
        torch.testing.assert_close(x[:, ::2].contiguous().cpu(), a[:, ::2].contiguous())
        torch.testing.assert_close(x.to(torch.float16).cpu(), a.to(torch.float16))
        assert x.sum().item() == torch.tensor(a.sum().item()).item()
        # One training step of a small model, on both devices from the same weights.
        model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        twin = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        twin.load_state_dict(model.state_dict())
        twin.to("neuron")
        for m, data in ((model, a), (twin, x)):
            opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
            loss = m(data).pow(2).mean()
            loss.backward()
            opt.step()
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(q.detach().cpu(), p.detach())
        assert _runtime_c.open_host_access_windows() == 0
        print("ok")
    """, protect=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok" in run.stdout


def test_pinned_copies_both_ways_and_non_blocking_go_through_the_seam():
    # Pinned host memory is host memory: copies between it and the device are the seam's
    # memcpy, blocking or not, and read back what was written.
    run = _run("""
        import torch
        from torchneuron._C import runtime as _runtime_c
        a = torch.randn(4096)
        pinned = a.pin_memory()
        assert pinned.is_pinned()
        x = pinned.to("neuron", non_blocking=True)
        back = torch.empty(4096).pin_memory()
        back.copy_(x * 2, non_blocking=True)
        torch.neuron.synchronize()
        torch.testing.assert_close(back, a * 2)
        torch.testing.assert_close(x.cpu(), a)
        assert _runtime_c.open_host_access_windows() == 0
        print("ok")
    """, protect=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok" in run.stdout


def test_a_collective_keeps_memory_accessible_until_its_wait_then_closes_its_window(tmp_path):
    run = _run(f"""
        import gc
        import torch
        import torch.distributed as dist
        from torchneuron._C import runtime as _runtime_c
        dist.init_process_group("neuron", init_method="file://{tmp_path / 'store'}", rank=0,
                                world_size=1)
        x = torch.arange(8.0, device="neuron")
        work = dist.all_reduce(x, async_op=True)
        print("in flight", _runtime_c.open_host_access_windows())  # gloo's thread may use x
        work.wait()
        del work
        gc.collect()
        print("after wait", _runtime_c.open_host_access_windows())
        torch.testing.assert_close(x.cpu(), torch.arange(8.0))
        dist.destroy_process_group()
    """, protect=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "in flight 1" in run.stdout and "after wait 0" in run.stdout, run.stdout


def test_sharing_a_neuron_tensor_with_another_process_is_refused_naming_the_mode():
    run = _run("""
        from multiprocessing.reduction import ForkingPickler
        import torch
        x = torch.ones(4, device="neuron")
        try:
            ForkingPickler.dumps(x)  # what a torch.multiprocessing queue sends
        except RuntimeError as e:
            print("ERROR:", e)
    """, protect=True)
    assert run.returncode == 0, run.stderr
    assert "ERROR:" in run.stdout and "NEURON_MEMORY_PROTECT=1" in run.stdout, run.stdout
    assert "another process" in run.stdout, run.stdout


DLPACK = """
    import torch
    for export in (lambda t: t.__dlpack__(), torch.utils.dlpack.to_dlpack, torch.to_dlpack):
        print("cpu", type(export(torch.ones(2))).__name__)  # CPU tensors export as before
        try:
            export(torch.ones(2, device="neuron"))
        except RuntimeError as e:
            print("ERROR:", e)
        else:
            print("exported")
"""


def test_dlpack_export_of_a_neuron_tensor_is_refused_naming_the_mode():
    run = _run(DLPACK, protect=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("cpu PyCapsule") == 3, run.stdout
    assert run.stdout.count("ERROR: neuron: exporting a neuron tensor through DLPack") == 3
    assert "is refused under NEURON_MEMORY_PROTECT=1" in run.stdout, run.stdout
    assert "exported" not in run.stdout


def test_dlpack_export_is_unchanged_in_the_default_runtime():
    run = _run(DLPACK, protect=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("exported") == 3 and "ERROR" not in run.stdout, run.stdout


def test_the_runtime_is_chosen_before_it_is_configured():
    run = _run("""
        import torch
        from torchneuron._C import runtime as _runtime_c
        torch.neuron.device_count()  # configures the default runtime
        try:
            _runtime_c.set_memory_protection(True)
        except RuntimeError as e:
            print("ERROR:", e)
    """, protect=False)
    assert run.returncode == 0, run.stderr
    assert "memory protection must be chosen before the runtime is configured" in run.stdout


def test_the_variable_takes_0_or_1_and_names_itself_otherwise():
    assert config.load({PROTECT: "1"}).memory_protect
    assert not config.load({}).memory_protect
    with pytest.raises(config.ConfigError, match="NEURON_MEMORY_PROTECT='yes' is not valid; "
                                                 "accepted values: 0, 1"):
        config.load({PROTECT: "yes"})
