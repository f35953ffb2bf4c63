"""A kernel runs its tile operations without an OpenMP team on its own thread (host_threads.py)
and hands the thread's setting back when it returns or fails; the process's count never moves."""

import pytest
import torch

import nki
import nki.language as nl
from torchneuron.kernels.nki.host_threads import _runtime


@pytest.mark.skipif(_runtime() is None, reason="no OpenMP runtime in this build of torch")
def test_kernel_runs_with_one_thread_and_restores_the_callers():
    before, seen = torch.get_num_threads(), []

    @nki.jit
    def k(x):
        seen.append(torch.get_num_threads())
        t = nl.load(x)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    x = torch.randn(8, 8)
    torch.testing.assert_close(k(x), x)
    assert seen == [1]
    assert torch.get_num_threads() == before

    @nki.jit
    def fails(x):
        raise RuntimeError("inside the kernel")

    with pytest.raises(RuntimeError, match="inside the kernel"):
        fails(x)
    assert torch.get_num_threads() == before
