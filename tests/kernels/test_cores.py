"""The multi-core model: kernel[2](...) runs one program per NeuronCore of a Logical NeuronCore,
the cores share HBM and wait for each other at nisa.core_barrier; misuse of the barrier fails
with the core-barrier rule instead of hanging."""

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiValidationError


@nki.jit
def exchange_halves(x):
    """Core c scales its half of x into a shared scratch, waits at the barrier, then reads the
    OTHER core's half: correct only if the barrier lets the other core write first."""
    c = nl.program_id(0)
    half = x.shape[0] // 2
    scratch = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    mine = nl.ndarray((half, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[c * half:(c + 1) * half, :])
    scaled = nl.ndarray(mine.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=scaled, data=mine, op0=nl.multiply, operand0=float(c + 2))
    nisa.dma_copy(dst=scratch[c * half:(c + 1) * half, :], src=scaled)
    nisa.core_barrier(scratch, (0, 1))
    other = 1 - c
    theirs = nl.ndarray(mine.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=theirs, src=scratch[other * half:(other + 1) * half, :])
    nisa.dma_copy(dst=out[c * half:(c + 1) * half, :], src=theirs)
    return out


def test_cores_exchange_through_shared_hbm_after_a_barrier():
    x = torch.randn(64, 24)
    out = exchange_halves[2](x.to("neuron")).cpu()
    expected = torch.cat([x[32:] * 3.0, x[:32] * 2.0])
    torch.testing.assert_close(out, expected)


def test_barrier_needs_a_two_core_launch():
    with pytest.raises(NkiValidationError, match=r"\[core-barrier\].*launched on one core; a "
                       r"barrier needs a launch on two cores"):
        exchange_halves(torch.randn(8, 4))


def barrier_kernel(cores=(0, 1), buffer=nl.shared_hbm, only_core=None):
    @nki.jit
    def k(x):
        t = nl.ndarray((4, 4), nl.float32, buffer=buffer, name="flag")
        if only_core is None or nl.program_id(0) == only_core:
            nisa.core_barrier(t, cores)
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        return out
    return k[2]


def test_barrier_rules():
    with pytest.raises(NkiValidationError, match=r"\[core-barrier\].*cores=\(0, 2\)"):
        barrier_kernel(cores=(0, 2))(torch.zeros(1))
    with pytest.raises(NkiValidationError, match=r"\[core-barrier\].*data 'flag' \(sbuf, shape "
                       r"\(4, 4\), float32\) must be a tensor in shared HBM"):
        barrier_kernel(buffer=nl.sbuf)(torch.zeros(1))


@pytest.mark.parametrize("only_core", [0, 1])
def test_a_barrier_only_one_core_reaches_is_refused(only_core):
    other = 1 - only_core
    with pytest.raises(NkiValidationError, match=rf"\[core-barrier\].*core {only_core} waits "
                       rf"at a barrier on 'flag'.*core {other} .*returned without reaching it"):
        barrier_kernel(only_core=only_core)(torch.zeros(1))


def test_programs_without_barriers_still_run_in_order():
    """An SPMD grid without barriers: each program writes its own tile, as before."""
    @nki.jit
    def k(x):
        i, j = nl.program_id(0), nl.program_id(1)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((8, 8), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 8:(i + 1) * 8, j * 8:(j + 1) * 8])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(i * 10 + j))
        nisa.dma_copy(dst=out[i * 8:(i + 1) * 8, j * 8:(j + 1) * 8], src=t)
        return out

    x = torch.randn(24, 16)
    bias = torch.tensor([[i * 10 + j for j in range(2)] for i in range(3)], dtype=torch.float32)
    expected = x + bias.repeat_interleave(8, 0).repeat_interleave(8, 1)
    torch.testing.assert_close(k[3, 2](x), expected)


@nki.jit
def swap_add(x):
    """Each core holds half of the rows' partial sums; sendrecv swaps them and both add (the
    LNC reduction AWS's kernels do), then each core stores the total into its own half."""
    c = nl.program_id(0)
    half = x.shape[0] // 2
    mine = nl.ndarray((half, x.shape[1]), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[c * half:(c + 1) * half, :])
    theirs = nl.ndarray(mine.shape, x.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - c, recv_from_rank=1 - c, pipe_id=0)
    total = nl.ndarray(mine.shape, x.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=total, data1=mine, data2=theirs, op=nl.add)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[c * half:(c + 1) * half, :], src=total)
    return out


def test_sendrecv_exchanges_tiles_between_the_two_cores():
    x = torch.randn(64, 16)
    total = x[:32] + x[32:]
    torch.testing.assert_close(swap_add[2](x.to("neuron")).cpu(), torch.cat([total, total]))


def test_sendrecv_rules():
    with pytest.raises(NkiValidationError, match=r"\[sendrecv\].*launched on one core"):
        swap_add(torch.randn(8, 4))

    @nki.jit
    def wrong_peer(x):
        t = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=t, send_to_rank=nl.program_id(0), recv_from_rank=0, pipe_id=0)

    with pytest.raises(NkiValidationError, match=r"\[sendrecv\].*send_to_rank=0 on core 0; the "
                       r"other core of the launch is 1"):
        wrong_peer[2](torch.zeros(1))

    @nki.jit
    def mismatched(x):
        c = nl.program_id(0)
        t = nl.ndarray((4, 4 + 4 * c), nl.float32, buffer=nl.sbuf, name=f"t{c}")
        nisa.sendrecv(src=t, dst=t, send_to_rank=1 - c, recv_from_rank=1 - c, pipe_id=0)

    with pytest.raises(NkiValidationError, match=r"\[sendrecv\].*core 0 sent 't0' \(sbuf, shape "
                       r"\(4, 4\), float32\), which does not fit dst 't1' \(sbuf, shape \(4, 8\)"):
        mismatched[2](torch.zeros(1))


@nki.jit
def swap_on_two_pipes(x):
    """Two exchanges on different pipe_ids, posted in opposite orders by the two cores: NKI 0.8
    ignores pipe_id, so the Nth exchange of one core meets the Nth of the other."""
    c = nl.program_id(0)
    a = nl.ndarray((4, 4), x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=a, value=float(c + 1))
    b = nl.ndarray((4, 4), x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=b, value=float(10 * (c + 1)))
    got_first = nl.ndarray((4, 4), x.dtype, buffer=nl.sbuf)
    got_second = nl.ndarray((4, 4), x.dtype, buffer=nl.sbuf)
    first_pipe, second_pipe = (0, 1) if c == 0 else (1, 0)
    nisa.sendrecv(src=a, dst=got_first, send_to_rank=1 - c, recv_from_rank=1 - c,
                  pipe_id=first_pipe)
    nisa.sendrecv(src=b, dst=got_second, send_to_rank=1 - c, recv_from_rank=1 - c,
                  pipe_id=second_pipe)
    out = nl.ndarray((2, 8, 4), x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[c, 0:4, :], src=got_first)
    nisa.dma_copy(dst=out[c, 4:8, :], src=got_second)
    return out


def test_the_nisa_lnc_functions_are_deprecated_and_sendrecv_ignores_pipe_id():
    with pytest.warns(DeprecationWarning, match=r"nisa\.sendrecv is deprecated in NKI 0\.8; use "
                      r"nki\.lnc\.sendrecv without pipe_id"):
        out = swap_on_two_pipes[2](torch.zeros(1, device="neuron")).cpu()
    # Core 0 gets core 1's first tile (2) then its second (20), and core 1 the reverse values.
    torch.testing.assert_close(out[0], torch.cat([torch.full((4, 4), 2.0),
                                                  torch.full((4, 4), 20.0)]))
    torch.testing.assert_close(out[1], torch.cat([torch.full((4, 4), 1.0),
                                                  torch.full((4, 4), 10.0)]))
    with pytest.warns(DeprecationWarning, match=r"nisa\.core_barrier is deprecated in NKI 0\.8; "
                      r"use nki\.lnc\.core_barrier"):
        exchange_halves[2](torch.randn(8, 4).to("neuron"))
