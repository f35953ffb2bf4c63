"""nki.lnc (the newest reference's module for the two cores of a Logical NeuronCore):
core_barrier, sendrecv without pipe_id and sendrecv_compute (dst = reduce_op(src, peer's src)),
plus nisa.sendrecv_compute, run on kernel[2] launches against torch references, and their rules."""

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
import nki.lnc as lnc
from torchneuron.kernels.nki import NkiValidationError


def halves_kernel(exchange, target="trn3"):
    """Core c loads half c of x's rows into SBUF, calls exchange(mine, out_tile, c), stores the
    result into its half of the output."""
    @nki.jit(platform_target=target)
    def k(x):
        c = nl.program_id(0)
        half = x.shape[0] // 2
        mine = nl.ndarray((half, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mine, src=x[c * half:(c + 1) * half, :])
        result = nl.ndarray(mine.shape, x.dtype, buffer=nl.sbuf)
        exchange(mine, result, c)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[c * half:(c + 1) * half, :], src=result)
        return out
    return k[2]


def test_sendrecv_swaps_the_halves():
    k = halves_kernel(lambda mine, result, c: lnc.sendrecv(
        src=mine, dst=result, send_to_rank=1 - c, recv_from_rank=1 - c, priority=1))
    x = torch.randn(64, 24)
    torch.testing.assert_close(k(x.to("neuron")).cpu(), torch.cat([x[32:], x[:32]]))


@pytest.mark.parametrize("op, reference", [(nl.add, torch.add), (nl.maximum, torch.maximum),
                                           (nl.minimum, torch.minimum)])
def test_sendrecv_compute_reduces_with_the_peer(op, reference):
    k = halves_kernel(lambda mine, result, c: lnc.sendrecv_compute(
        src=mine, dst=result, send_to_rank=1 - c, recv_from_rank=1 - c, reduce_op=op))
    x = torch.randn(64, 24)
    total = reference(x[:32], x[32:])
    torch.testing.assert_close(k(x.to("neuron")).cpu(), torch.cat([total, total]))


def test_nisa_sendrecv_compute_is_the_same_instruction():
    k = halves_kernel(lambda mine, result, c: nisa.sendrecv_compute(
        src=mine, dst=result, send_to_rank=1 - c, recv_from_rank=1 - c, reduce_op=nl.add),
        target=None)
    x = torch.randn(32, 8).bfloat16()
    total = (x[:16].float() + x[16:].float()).bfloat16()
    torch.testing.assert_close(k(x.to("neuron")).cpu(), torch.cat([total, total]))


def test_core_barrier_orders_the_cores_writes():
    @nki.jit
    def k(x):
        c = nl.program_id(0)
        scratch = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((16, x.shape[1]), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[c * 16:(c + 1) * 16, :])
        nisa.dma_copy(dst=scratch[c * 16:(c + 1) * 16, :], src=t)
        lnc.core_barrier(scratch, (0, 1))
        nisa.dma_copy(dst=t, src=scratch[(1 - c) * 16:(2 - c) * 16, :])
        nisa.dma_copy(dst=out[c * 16:(c + 1) * 16, :], src=t)
        return out

    x = torch.randn(32, 8)
    torch.testing.assert_close(k[2](x.to("neuron")).cpu(), torch.cat([x[16:], x[:16]]))


def run_pair(body, target="trn3", cores=2):
    @nki.jit(platform_target=target)
    def k(x):
        c = nl.program_id(0) if cores == 2 else 0
        body(c)
        return nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    return k[cores](torch.zeros(1)) if cores == 2 else k(torch.zeros(1))


def tile(buffer=nl.sbuf, dtype=nl.float32, shape=(4, 4)):
    return nl.ndarray(shape, dtype, buffer=buffer)


def expect(rule, match, body, **kwargs):
    with pytest.raises(NkiValidationError, match=rf"\[{rule}\].*{match}"):
        run_pair(body, **kwargs)


def test_priority_rules():
    expect("architecture", "nki.lnc.sendrecv with priority= needs NeuronCore-v4",
           lambda c: lnc.sendrecv(tile(), tile(), 1 - c, 1 - c, priority=0), target="trn2")
    expect("dma-mode", r"priority=5 must be 0 \(highest\) to 3",
           lambda c: lnc.sendrecv(tile(), tile(), 1 - c, 1 - c, priority=5))
    expect("dma-mode", "with dma_engine=gpsimd_dma; that engine takes priority=None",
           lambda c: lnc.sendrecv(tile(), tile(), 1 - c, 1 - c,
                                  dma_engine=nisa.dma_engine.gpsimd_dma, priority=1))


def test_sendrecv_compute_rules():
    expect("operator", r"reduce_op=nl.multiply; the DMA reduction supports nl.add",
           lambda c: lnc.sendrecv_compute(tile(), tile(), 1 - c, 1 - c, reduce_op=nl.multiply))
    expect("sendrecv", "must both be in SBUF or both in private HBM",
           lambda c: lnc.sendrecv_compute(tile(nl.shared_hbm), tile(nl.shared_hbm), 1 - c,
                                          1 - c, reduce_op=nl.add))
    expect("sendrecv", "must both be in SBUF or both in private HBM",
           lambda c: lnc.sendrecv_compute(tile(), tile(nl.private_hbm), 1 - c, 1 - c,
                                          reduce_op=nl.add))
    expect("sendrecv", "must have the same element count and dtype",
           lambda c: lnc.sendrecv_compute(tile(), tile(dtype=nl.bfloat16), 1 - c, 1 - c,
                                          reduce_op=nl.add))
    expect("sendrecv", "launched on one core",
           lambda c: lnc.sendrecv_compute(tile(), tile(), 1, 1, reduce_op=nl.add), cores=1)
    expect("sendrecv", "recv_from_rank=0 on core 0",
           lambda c: lnc.sendrecv(tile(), tile(), 1 - c, 0))


def test_core_barrier_rules():
    expect("core-barrier", "nki.lnc.core_barrier.*must be a tensor in shared HBM",
           lambda c: lnc.core_barrier(tile(), (0, 1)))
    expect("core-barrier", "nki.lnc.core_barrier.*a barrier needs a launch on two cores",
           lambda c: lnc.core_barrier(tile(nl.shared_hbm), (0, 1)), cores=1)
