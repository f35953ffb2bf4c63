"""Indirect DMA: access patterns with scalar_offset= and vector_offset= (gathers and scatters by
indices the kernel reads at run time), against torch indexing, and the indirect-offset rule."""

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from nki.isa.constants import oob_mode
from torchneuron.kernels.nki import NkiValidationError


@nki.jit
def gather_rows(table, index, skip: bool = False):
    """out[i] = table[index[i]] for 64 indices (AWS's MoE kernels gather token rows so)."""
    n, d = index.shape[0], table.shape[1]
    idx = nl.ndarray((n, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=index)
    rows = nl.ndarray((n, d), table.dtype, buffer=nl.sbuf)
    nisa.memset(dst=rows, value=-1.0)
    nisa.dma_copy(dst=rows, src=table.ap(pattern=[[d, n], [1, d]], offset=0, vector_offset=idx,
                                         indirect_dim=0),
                  oob_mode=oob_mode.skip if skip else oob_mode.error)
    out = nl.ndarray((n, d), table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=rows)
    return out


def test_vector_offset_gathers_rows():
    table, index = torch.randn(300, 48), torch.randint(0, 300, (64, 1), dtype=torch.int32)
    out = gather_rows(table.to("neuron"), index.to("neuron"))
    torch.testing.assert_close(out.cpu(), table[index.reshape(-1).long()])


def test_vector_offset_scatters_rows_into_a_cache():
    @nki.jit
    def scatter(cache, new, index):
        n, d = new.shape
        idx = nl.ndarray((n, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=index)
        tile = nl.ndarray((n, d), new.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=new)
        nisa.dma_copy(dst=cache.ap(pattern=[[d, n], [1, d]], offset=0, vector_offset=idx,
                                   indirect_dim=0), src=tile)
        return cache

    cache, new = torch.zeros(100, 16), torch.randn(8, 16)
    index = torch.randperm(100)[:8].to(torch.int32).reshape(8, 1)
    expected = cache.clone()
    expected[index.reshape(-1).long()] = new
    out = scatter(cache, new, index)
    torch.testing.assert_close(out, expected)


def test_scalar_offset_selects_an_expert_from_a_register():
    @nki.jit
    def pick(weights, expert):
        E, K, N = weights.shape
        e = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=e, src=expert)
        reg = nisa.register_alloc()
        nisa.register_load(reg, e)
        w = nl.ndarray((K, N), weights.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=w, src=weights.ap(pattern=[[N, K], [1, N]], offset=0,
                                            scalar_offset=reg, indirect_dim=0))
        out = nl.ndarray((K, N), weights.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=w)
        return out

    weights = torch.randn(6, 32, 20)
    torch.testing.assert_close(pick(weights, torch.tensor([[4]], dtype=torch.int32)),
                               weights[4])


def test_out_of_range_index_is_refused_or_skipped():
    table = torch.randn(50, 8)
    index = torch.arange(64, dtype=torch.int32).reshape(64, 1)  # 50..63 are outside
    with pytest.raises(NkiValidationError, match=r"\[indirect-offset\] nisa.dma_copy: "
                       r"vector_offset .*shape \(64, 1\), int32\) gives index 50 \(row 50\) for "
                       r"dimension 0 of 'table' \(private_hbm, shape \(50, 8\), float32\), whose size "
                       r"is 50"):
        gather_rows(table, index)
    out = gather_rows(table, index, True)
    torch.testing.assert_close(out[:50], table)
    torch.testing.assert_close(out[50:], torch.full((14, 8), -1.0))  # skipped rows untouched


def test_vector_offset_must_match_the_pattern_rows():
    @nki.jit
    def k(table):
        idx = nl.ndarray((16, 1), nl.int32, buffer=nl.sbuf)
        table.ap(pattern=[[8, 32], [1, 8]], offset=0, vector_offset=idx, indirect_dim=0)

    with pytest.raises(NkiValidationError, match=r"\[indirect-offset\].*holds 16 indices but "
                       r"the pattern's first dimension has 32 rows"):
        k(torch.zeros(40, 8))
