"""Extensions' catch-all kernels on neuron tensors (csrc/aten/HostKernels.h): the dispatcher runs a
CompositeImplicitAutograd kernel directly on neuron tensors, ahead of the boxed fallback, so a
kernel that reads device memory through data pointers (vLLM CPU's attention) would read it while
queued ops still produce it. torchneuron.runtime.execution.guard_host_kernels makes such ops wait.
The ops here stand in for a C++ extension's: Python kernels registered as catch-alls, one reading
memory through its data pointer, one composing differentiable ops."""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron.runtime import execution

NAMESPACE = "tn_host_kernel_test"


def read_sum(x: torch.Tensor) -> torch.Tensor:
    """Sums a contiguous float32 tensor by reading its memory as the host sees it."""
    buf = (ctypes.c_float * x.numel()).from_address(x.data_ptr())
    return torch.tensor(float(np.frombuffer(buf, dtype=np.float32).sum(dtype=np.float64)))


def define_ops(namespace: str) -> torch.library.Library:
    lib = torch.library.Library(namespace, "DEF")
    lib.define("read_sum(Tensor x) -> Tensor")
    lib.impl("read_sum", read_sum, "CompositeImplicitAutograd")
    lib.define("twice_plus(Tensor x, Tensor y) -> Tensor")
    lib.impl("twice_plus", lambda x, y: x * 2 + y, "CompositeImplicitAutograd")
    lib.define("on_cpu(Tensor x) -> Tensor")  # has a CPU kernel: not a host kernel to guard
    lib.impl("on_cpu", lambda x: x + 1, "CPU")
    lib.impl("on_cpu", lambda x: x + 1, "CompositeImplicitAutograd")
    return lib


@pytest.fixture(scope="module")
def guarded():
    lib = define_ops(NAMESPACE)
    names = execution.guard_host_kernels(NAMESPACE)
    yield names
    del lib


def test_guards_only_catch_all_only_ops_and_only_once(guarded):
    assert sorted(guarded) == [f"{NAMESPACE}::read_sum", f"{NAMESPACE}::twice_plus"]
    for name in guarded:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1")
    assert execution.guard_host_kernels(NAMESPACE) == ()


def test_guarded_op_equals_cpu(guarded):
    x = torch.randn(300, 7)
    y = torch.randn(300, 7)
    ops = getattr(torch.ops, NAMESPACE)
    got = ops.twice_plus(x.to("neuron"), y.to("neuron"))
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), ops.twice_plus(x, y))
    torch.testing.assert_close(ops.read_sum((x * 3).to("neuron")), ops.read_sum(x * 3))


def test_guarded_composite_still_records_autograd(guarded):
    x = torch.randn(5, 4, requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    ops = getattr(torch.ops, NAMESPACE)
    ops.twice_plus(x, torch.ones(5, 4)).sum().backward()
    ops.twice_plus(xn, torch.ones(5, 4, device="neuron")).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad)


def test_unknown_namespace_is_an_error_naming_it():
    with pytest.raises(ValueError, match="no operator is registered in the namespace "
                                         "'tn_no_such_namespace'"):
        execution.guard_host_kernels("tn_no_such_namespace")


# In asynchronous mode (its own process: the mode is per process): the op reads memory that a
# queued matmul is still writing, unless guarded.
ASYNC_SCRIPT = f"""
import sys, torch
from torchneuron._C import launch as _launch_c
sys.path.insert(0, {os.path.dirname(__file__)!r})
from test_host_kernels import define_ops, NAMESPACE
from torchneuron.runtime import execution
lib = define_ops(NAMESPACE)
if sys.argv[1] == "guard":
    execution.guard_host_kernels(NAMESPACE)
a = torch.full((1500, 1500), 0.5)
expected = torch.ops.{NAMESPACE}.read_sum(a @ a).item()
sums = []
for _ in range(3):
    an = a.to("neuron")
    sums.append(torch.ops.{NAMESPACE}.read_sum(an @ an).item())
print("mode", _launch_c.eager_mode(), "expected", expected, "sums", sums)
print("EQUAL" if all(abs(s - expected) <= 1e-6 * expected for s in sums) else "DIFFERENT")
"""


def run_async(python, arg: str) -> str:
    out = python(ASYNC_SCRIPT, {"NEURON_EAGER_MODE": "async"}, timeout=300, args=(arg,))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "mode async" in out.stdout, out.stdout
    return out.stdout


def test_async_guarded_host_kernel_reads_after_queued_work(python):
    assert "EQUAL" in run_async(python, "guard")
