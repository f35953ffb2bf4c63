"""nisa.range_select, nc_find_index8, nc_match_replace8 and nc_stream_shuffle against numpy/torch
references, and the rules each brings."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiValidationError
from tests.kernels.tiles import tile_in, tile_out


def test_range_select_keeps_a_causal_window_and_reduces_its_max():
    @nki.jit
    def k(x, lo, hi):
        xs, l, h = tile_in(x), tile_in(lo), tile_in(hi)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        mx = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=out, on_true_tile=xs, comp_op0=nl.greater_equal,
                          comp_op1=nl.less, bound0=l, bound1=h, reduce_res=mx,
                          reduce_cmd=nisa.reduce_cmd.reset_reduce, range_start=8,
                          on_false_value=-3.4028235e38)
        return tile_out(out), tile_out(mx)

    x = torch.randn(32, 64)
    lo = torch.randint(0, 40, (32, 1)).float()
    hi = lo + torch.randint(1, 30, (32, 1)).float()
    out, mx = k(x, lo, hi)
    j = torch.arange(64).float().reshape(1, -1) + 8
    ref = torch.where((j >= lo) & (j < hi), x, torch.finfo(torch.float32).min)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(mx, ref.amax(dim=1, keepdim=True))


def test_range_select_rules():
    def body(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((4, 2), nl.float32, buffer=nl.sbuf, name="bound")
        nisa.range_select(dst=t, on_true_tile=t, comp_op0=nl.less, comp_op1=nl.less,
                          bound0=b, bound1=b)

    with pytest.raises(NkiValidationError, match=r"\[operand-shape\].*bound0 'bound' \(sbuf, "
                       r"shape \(4, 2\), float32\) must be a scalar or a \(4, 1\) tile"):
        nki.jit(body)(torch.zeros(1))

    def not_compare(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=t, on_true_tile=t, comp_op0=nl.add, comp_op1=nl.less,
                          bound0=0.0, bound1=1.0)

    with pytest.raises(NkiValidationError, match=r"\[operator\].*comp_op0=nl.add"):
        nki.jit(not_compare)(torch.zeros(1))


def reference_find(data, vals, descending=False):
    """numpy: each value takes the first occurrence not taken by a value processed before it."""
    P = data.shape[0]
    pos = np.full((P, 8), 0xFFFFFFFF, dtype=np.int64)
    for p in range(P):
        taken = set()
        for i in (range(7, -1, -1) if descending else range(8)):
            for j in range(data.shape[1]):
                if data[p, j] == vals[p, i] and j not in taken:
                    taken.add(j)
                    pos[p, i] = j
                    break
    return pos


def search_case():
    gen = torch.Generator().manual_seed(3)
    data = torch.randint(0, 20, (16, 64), generator=gen).float()
    vals = data[:, torch.randperm(64, generator=gen)[:8]].clone()
    vals[0, 5] = 99.0  # not present
    vals[1, 2] = vals[1, 6] = data[1, 10]  # a duplicate value
    return data, vals


def test_nc_find_index8_matches_numpy():
    @nki.jit
    def k(data, vals):
        idx = nl.ndarray((data.shape[0], 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=idx, data=tile_in(data), vals=tile_in(vals))
        i32 = nl.ndarray(idx.shape, nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=i32, src=idx.view(nl.int32))
        return tile_out(i32)

    data, vals = search_case()
    got = k(data, vals).numpy().view(np.uint32).astype(np.int64)
    np.testing.assert_array_equal(got, reference_find(data.numpy(), vals.numpy()))


def test_nc_match_replace8_matches_numpy():
    @nki.jit
    def k(data, vals):
        d = tile_in(data)
        out = nl.ndarray(data.shape, nl.float32, buffer=nl.sbuf)
        idx = nl.ndarray((data.shape[0], 8), nl.int32, buffer=nl.sbuf)
        idx_u = idx.view(nl.uint32)
        nisa.nc_match_replace8(dst=out, data=d, vals=tile_in(vals), imm=-1.0, dst_idx=idx_u)
        return tile_out(out), tile_out(idx)

    data, vals = search_case()
    out, idx = k(data, vals)
    pos = reference_find(data.numpy(), vals.numpy(), descending=True)
    np.testing.assert_array_equal(idx.numpy().view(np.uint32).astype(np.int64), pos)
    expected = data.numpy().copy()
    for p in range(16):
        for i in range(8):
            if pos[p, i] != 0xFFFFFFFF:
                expected[p, pos[p, i]] = -1.0
    np.testing.assert_array_equal(out.numpy(), expected)


def test_search_rules():
    def few_values(x):
        d = nl.ndarray((4, 64), nl.float32, buffer=nl.sbuf)
        v = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf, name="vals")
        i = nl.ndarray((4, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=i, data=d, vals=v)

    with pytest.raises(NkiValidationError, match=r"\[operand-shape\].*vals 'vals' \(sbuf, shape "
                       r"\(4, 4\), float32\) must hold exactly 8 values"):
        nki.jit(few_values)(torch.zeros(1))

    def float_indices(x):
        d = nl.ndarray((4, 64), nl.float32, buffer=nl.sbuf)
        v = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        i = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf, name="idx")
        nisa.nc_find_index8(dst=i, data=d, vals=v)

    with pytest.raises(NkiValidationError, match=r"\[operand-dtype\].*'idx'.*uint16 or uint32"):
        nki.jit(float_indices)(torch.zeros(1))


@nki.jit
def shuffle(x, mask):
    t = tile_in(x)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=out, value=7.0)
    nisa.nc_stream_shuffle(dst=out, src=t, shuffle_mask=mask)
    return tile_out(out)


def test_nc_stream_shuffle_permutes_each_quadrant():
    x = torch.randn(64, 12)
    mask = [(i * 5 + 3) % 32 for i in range(32)]
    mask[4] = 255  # partition 4 of each quadrant keeps dst's value
    ref = torch.full_like(x, 7.0)
    for q in (0, 32):
        for i, m in enumerate(mask):
            if m != 255:
                ref[q + i] = x[q + m]
    torch.testing.assert_close(shuffle(x.to("neuron"), mask).cpu(), ref)


def test_nc_stream_shuffle_in_place_broadcasts_a_partition():
    @nki.jit
    def k(x):
        t = tile_in(x)
        nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=[0] * 32)
        return tile_out(t)

    x = torch.randn(32, 5)
    torch.testing.assert_close(k(x), x[0:1].expand(32, 5))


def test_nc_stream_shuffle_mask_rules():
    x = torch.randn(16, 4)
    with pytest.raises(NkiValidationError, match=r"\[shuffle-mask\].*shuffle_mask\[3\] = 20 is "
                       r"outside the 16 partitions of a quadrant of src .*shape \(16, 4\)"):
        shuffle(x, [0, 1, 2, 20] + [0] * 28)
    with pytest.raises(NkiValidationError, match=r"\[shuffle-mask\].*shuffle_mask has 8 "
                       r"elements; it must have 32"):
        shuffle(x, list(range(8)))
    with pytest.raises(NkiValidationError, match=r"\[shuffle-partitions\].*48 partitions"):
        shuffle(torch.randn(48, 4), list(range(32)))


def test_select_reduce_matches_numpy_where_and_max():
    @nki.jit
    def k(pred, x, fill):
        p, t, f = tile_in(pred), tile_in(x), tile_in(fill)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        mx = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(dst=out, predicate=p, on_true=t, on_false=f, reduce_res=mx,
                           reduce_cmd=nisa.reduce_cmd.reset_reduce, reverse_pred=True)
        return tile_out(out), tile_out(mx)

    pred = torch.randint(0, 2, (16, 40), dtype=torch.uint8)
    x, fill = torch.randn(16, 40), torch.randn(16, 1)
    out, mx = k(pred, x, fill)
    ref = np.where(pred.numpy() == 0, x.numpy(), fill.numpy())
    np.testing.assert_allclose(out.numpy(), ref)
    np.testing.assert_allclose(mx.numpy(), ref.max(axis=1, keepdims=True))

    def bad(x):
        p = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf, name="pred")
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(dst=t, predicate=p, on_true=t, on_false=0.0)

    with pytest.raises(NkiValidationError, match=r"\[operand-dtype\].*predicate 'pred'"):
        nki.jit(bad)(torch.zeros(1))
