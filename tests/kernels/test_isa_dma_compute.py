"""nisa.dma_compute against torch (the float32 sum of its sources cast to dst, the scatter-add
and gather-add read-modify-writes through vector_offset) and nisa.tensor_copy_dynamic_src/dst
(copies at a runtime offset), with their rules."""

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiValidationError
from tests.kernels.tiles import tile_in


def test_dma_compute_sums_sources_in_float32_and_casts_to_dst():
    @nki.jit
    def k(a, b, c):
        out = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.shared_hbm)
        nisa.dma_compute(dst=out, srcs=[a, tile_in(b), c], reduce_op=nl.add,
                         scales=[1.0, 1.0, 1.0])
        return out

    a, b, c = torch.randn(16, 32), torch.randn(16, 32).bfloat16(), torch.randn(16, 32)
    torch.testing.assert_close(k(a, b, c), (a + b.float() + c).bfloat16())


def test_dma_compute_scatter_add_into_hbm_rows():
    @nki.jit
    def k(table, rows, src):
        P, F = src.shape
        idx = tile_in(rows)
        s = tile_in(src)
        view = table.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0)
        nisa.dma_compute(dst=view, srcs=[view, s], reduce_op=nl.add)
        return table

    table = torch.randn(64, 8)
    rows = torch.randperm(64)[:16].to(torch.int32).reshape(16, 1)
    src = torch.randn(16, 8)
    ref = table.clone()
    ref[rows[:, 0].long()] += src
    torch.testing.assert_close(k(table.clone(), rows, src), ref)


def test_dma_compute_gather_add_from_hbm_rows():
    @nki.jit
    def k(table, rows, acc):
        P, F = acc.shape
        idx = tile_in(rows)
        a = tile_in(acc)
        view = table.ap(pattern=[[F, P], [1, F]], vector_offset=idx, indirect_dim=0)
        nisa.dma_compute(dst=a, srcs=[view, a], reduce_op=nl.add)
        out = nl.ndarray(acc.shape, acc.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    table = torch.randn(64, 8)
    rows = torch.randint(0, 64, (16, 1), dtype=torch.int32)
    acc = torch.randn(16, 8)
    torch.testing.assert_close(k(table, rows, acc), acc + table[rows[:, 0].long()])
    with pytest.raises(NkiValidationError, match=r"\[indirect-offset\].*index 64"):
        k(table, torch.full((16, 1), 64, dtype=torch.int32), acc)


def test_dma_compute_rules():
    def body(op=nl.add, scales=None, n=2, unique=True, indirect=False):
        def kernel(x):
            t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
            srcs = [t] * n
            if indirect:
                h = nl.ndarray((16, 8), nl.float32, buffer=nl.shared_hbm)
                i = nl.ndarray((4, 1), nl.int32, buffer=nl.sbuf)
                srcs = [h.ap(pattern=[[8, 4], [1, 8]], vector_offset=i, indirect_dim=0)] + \
                    [t] * (n - 1)
            nisa.dma_compute(dst=t, srcs=srcs, reduce_op=op, scales=scales,
                             unique_indices=unique)
        return nki.jit(kernel)

    with pytest.raises(NkiValidationError, match=r"\[operator\].*only nl.add"):
        body(op=nl.multiply)(torch.zeros(1))
    with pytest.raises(NkiValidationError, match=r"\[operand-type\].*scales=\[1.0, 2.0\]"):
        body(scales=[1.0, 2.0])(torch.zeros(1))
    with pytest.raises(NkiValidationError, match=r"\[dma-size\].*17 source tensors"):
        body(n=17)(torch.zeros(1))
    with pytest.raises(NkiValidationError, match=r"\[dma-mode\].*exactly 2 sources, got 3"):
        body(n=3, indirect=True)(torch.zeros(1))
    with pytest.raises(NkiValidationError, match=r"\[dma-mode\].*unique_indices=False"):
        body(unique=False, indirect=True)(torch.zeros(1))

    def sizes(x):
        a = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf, name="small")
        nisa.dma_compute(dst=a, srcs=[a, b], reduce_op=nl.add)

    with pytest.raises(NkiValidationError, match=r"\[dma-size\].*srcs\[1\] 'small'"):
        nki.jit(sizes)(torch.zeros(1))


def test_tensor_copy_dynamic_src_and_dst_read_the_offset_at_run_time():
    """Copy 4 columns starting at a runtime column of each partition, and back to another."""
    @nki.jit
    def k(x, where):
        t = tile_in(x)
        w = tile_in(where)
        reg = nisa.register_alloc()
        nisa.register_load(reg, w)
        mid = nl.ndarray((x.shape[0], 4), x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy_dynamic_src(dst=mid, src=t.ap([[x.shape[1], x.shape[0]], [1, 4]],
                                                       scalar_offset=reg, indirect_dim=1))
        o = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=o, value=0.0)
        nisa.tensor_copy_dynamic_dst(dst=o.ap([[x.shape[1], x.shape[0]], [1, 4]],
                                              scalar_offset=reg, indirect_dim=1), src=mid)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=o)
        return out

    x = torch.randn(8, 32)
    ref = torch.zeros(8, 32)
    ref[:, 11:15] = x[:, 11:15]
    torch.testing.assert_close(k(x, torch.tensor([[11]], dtype=torch.int32)), ref)

    def static(x):
        t = nl.ndarray((8, 32), nl.float32, buffer=nl.sbuf, name="t")
        nisa.tensor_copy_dynamic_src(dst=t[:, 0:4], src=t[:, 4:8])

    with pytest.raises(NkiValidationError, match=r"\[indirect-offset\].*src 't' .* must be "
                       "dynamically indexed within each partition"):
        nki.jit(static)(torch.zeros(1))
