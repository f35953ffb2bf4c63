"""NkiTensor.flatten_dims, reshape_dim, rearrange and vector_select (the newest reference's
views) against the same views of torch tensors, and their rules."""

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiValidationError


def copy_view(make_view, x, out_shape):
    """Loads x into SBUF, copies make_view(tile) to a fresh tile of out_shape, returns it."""
    @nki.jit
    def k(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = make_view(t)
        assert tuple(v.shape) == tuple(out_shape), v.shape
        o = nl.ndarray(out_shape, x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=v)
        out = nl.ndarray(out_shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=o)
        return out
    return k(x)


def test_flatten_dims_merges_a_contiguous_run():
    x = torch.randn(16, 2, 3, 4)
    out = copy_view(lambda t: t.flatten_dims(1, 2), x, (16, 6, 4))
    torch.testing.assert_close(out, x.flatten(1, 2))
    # after a slice of the last dim, dims 1..2 stay contiguous with each other
    out = copy_view(lambda t: t[:, :, :, 1:3].flatten_dims(1, 2), x, (16, 6, 2))
    torch.testing.assert_close(out, x[:, :, :, 1:3].flatten(1, 2))


def test_reshape_dim_splits_one_dimension_after_a_permute():
    x = torch.randn(16, 4, 24)
    out = copy_view(lambda t: t.permute((0, 2, 1)).reshape_dim(1, (4, -1)), x, (16, 4, 6, 4))
    torch.testing.assert_close(out, x.permute(0, 2, 1).reshape(16, 4, 6, 4))


def test_rearrange_splits_reorders_and_merges():
    x = torch.randn(16, 24)
    out = copy_view(lambda t: t.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4}), x,
                    (16, 6, 4))
    torch.testing.assert_close(out, x.reshape(16, 4, 6).permute(0, 2, 1))
    y = torch.randn(8, 2, 3, 5)
    out = copy_view(lambda t: t.rearrange(("p", "a", "b", "c"), ("p", ("a", "b"), "c")), y,
                    (8, 6, 5))
    torch.testing.assert_close(out, y.reshape(8, 6, 5))


def test_view_rules():
    def flat(x):
        t = nl.ndarray((4, 3, 5), nl.float32, buffer=nl.sbuf, name="t")
        t.permute((0, 2, 1)).flatten_dims(1, 2)

    with pytest.raises(NkiValidationError, match=r"\[reshape\].*'t'.*not contiguous in memory"):
        nki.jit(flat)(torch.zeros(1))

    def partition(x):
        nl.ndarray((4, 3), nl.float32, buffer=nl.sbuf).flatten_dims(0, 1)

    with pytest.raises(NkiValidationError, match=r"\[partition-dim\].*merges the partition"):
        nki.jit(partition)(torch.zeros(1))

    def split(x):
        nl.ndarray((4, 10), nl.float32, buffer=nl.sbuf).reshape_dim(1, (3, -1))

    with pytest.raises(NkiValidationError, match=r"must split dimension 1 of size 10 exactly"):
        nki.jit(split)(torch.zeros(1))

    def names(x):
        nl.ndarray((4, 10), nl.float32, buffer=nl.sbuf).rearrange(("p", "a"), ("p", "b"))

    with pytest.raises(NkiValidationError, match=r"must name exactly the dimensions"):
        nki.jit(names)(torch.zeros(1))


def test_vector_select_gathers_rows_per_partition():
    @nki.jit
    def k(table, rows):
        idx = nl.ndarray(rows.shape, rows.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=rows)
        t = nl.ndarray((rows.shape[0],) + tuple(table.shape[1:]), table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=table.vector_select(0, idx))
        out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    table = torch.randn(64, 4, 8)
    rows = torch.randint(0, 64, (32, 1), dtype=torch.int32)
    torch.testing.assert_close(k(table, rows), table[rows[:, 0].long()])

    def on_chip(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        i = nl.ndarray((4, 1), nl.int32, buffer=nl.sbuf)
        t.vector_select(0, i)

    with pytest.raises(NkiValidationError, match=r"\[indirect-offset\].*reads HBM tensors only"):
        nki.jit(on_chip)(torch.zeros(1))


def test_select_with_a_runtime_index_as_the_reference_shows():
    @nki.jit
    def k(hbm_t, which):
        idx = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx, src=which)
        t = nl.ndarray(hbm_t.shape[1:], hbm_t.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=hbm_t.select(0, idx))
        out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = torch.randn(4, 128, 8)
    torch.testing.assert_close(k(x, torch.tensor([[2]], dtype=torch.int32)), x[2])
    with pytest.raises(NkiValidationError, match=r"\[indirect-offset\].*index 4 .* dimension 0"):
        k(x, torch.tensor([[4]], dtype=torch.int32))

    def partition(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        t.select(0, nisa.register_alloc(1))

    with pytest.raises(NkiValidationError, match=r"\[partition-dim\].*dynamic select"):
        nki.jit(partition)(torch.zeros(1))
