"""nisa.nc_n_gather and nisa.local_gather against the numpy equivalents nki.isa documents, and
their rules."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiValidationError
from tests.kernels.tiles import tile_in, tile_out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_nc_n_gather_gathers_within_each_partition(dtype):
    @nki.jit
    def k(data, indices):
        d, i = tile_in(data), tile_in(indices)
        out = nl.ndarray(indices.shape, data.dtype, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=out, data=d, indices=i)
        return tile_out(out)

    data = (torch.randn(64, 4, 16) * 1000).to(dtype)
    indices = torch.randint(0, 64, (64, 3, 5)).to(torch.uint32)
    ref = np.take_along_axis(data.float().reshape(64, -1).numpy(),
                             indices.to(torch.int64).reshape(64, -1).numpy(), axis=1)
    torch.testing.assert_close(k(data, indices).float(),
                               torch.from_numpy(ref).reshape(64, 3, 5))


def reference_local_gather(src, index, num_elem, num_valid):
    """nki.isa.local_gather's documented numpy equivalent."""
    P = src.shape[0]
    src = src.reshape(P, -1, num_elem)
    out = np.empty((P, num_valid, num_elem), dtype=src.dtype)
    for core in range(P // 16):
        part = slice(core * 16, core * 16 + 16)
        indices_1d = index[part].flatten(order="F")[:num_valid]
        out[part] = np.take(src[part], indices_1d, axis=1)
    return out.reshape(P, -1)


@pytest.mark.parametrize("num_elem,num_valid", [(1, None), (4, 64), (2, 10)])
def test_local_gather_matches_the_documented_numpy(num_elem, num_valid):
    @nki.jit
    def k(src, index):
        s, i = tile_in(src), tile_in(index)
        valid = num_valid if num_valid is not None else 16 * index.shape[1]
        out = nl.ndarray((src.shape[0], valid * num_elem), src.dtype, buffer=nl.sbuf)
        nisa.local_gather(dst=out, src_buffer=s, index=i, num_elem_per_idx=num_elem,
                          num_valid_indices=num_valid)
        return tile_out(out)

    src = torch.randn(128, 512 // num_elem * num_elem)
    rows = src.shape[1] // num_elem
    per_core = torch.randint(0, rows, (16, 4), dtype=torch.int32)
    index = per_core.repeat(8, 1)
    index[32:48] = torch.randint(0, rows, (16, 4), dtype=torch.int32)  # one core differs
    valid = num_valid if num_valid is not None else 64
    ref = reference_local_gather(src.numpy(), index.numpy(), num_elem, valid)
    torch.testing.assert_close(k(src, index.to(torch.uint16)), torch.from_numpy(ref))


def test_gather_rules():
    def nc_range(x):
        d = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf, name="data")
        i = nl.ndarray((4, 2), nl.uint32, buffer=nl.sbuf, name="idx")
        nisa.memset(dst=d, value=0.0)
        nisa.memset(dst=i, value=8)
        nisa.nc_n_gather(dst=nl.ndarray((4, 2), nl.float32, buffer=nl.sbuf), data=d, indices=i)

    with pytest.raises(NkiValidationError, match=r"\[gather-index\].*'idx' \(sbuf, shape "
                       r"\(4, 2\), uint32\) holds 8 .* outside the 8 elements per partition of "
                       r"'data'"):
        nki.jit(nc_range)(torch.zeros(1))

    def nc_dtype(x):
        d = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        i = nl.ndarray((4, 2), nl.uint32, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=nl.ndarray((4, 2), nl.bfloat16, buffer=nl.sbuf), data=d, indices=i)

    with pytest.raises(NkiValidationError, match=r"\[operand-dtype\].*a gather moves bits"):
        nki.jit(nc_dtype)(torch.zeros(1))

    def nc_psum(x):
        d = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        i = nl.ndarray((4, 2), nl.uint32, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=nl.ndarray((4, 2), nl.float32, buffer=nl.sbuf), data=d, indices=i)

    with pytest.raises(NkiValidationError, match=r"\[memory-access\]"):
        nki.jit(nc_psum)(torch.zeros(1))

    def local(partitions=32, num_elem=1, valid=None, dst_free=64, value=0):
        def kernel(x):
            s = nl.ndarray((partitions, 16), nl.float32, buffer=nl.sbuf, name="src")
            i = nl.ndarray((partitions, 4), nl.uint16, buffer=nl.sbuf, name="index")
            nisa.memset(dst=s, value=0.0)
            nisa.memset(dst=i, value=value)
            out = nl.ndarray((partitions, dst_free), nl.float32, buffer=nl.sbuf)
            nisa.local_gather(dst=out, src_buffer=s, index=i, num_elem_per_idx=num_elem,
                              num_valid_indices=valid)
        return nki.jit(kernel)

    with pytest.raises(NkiValidationError, match=r"spans 24 partitions; local_gather needs a "
                       "multiple of 16"):
        local(partitions=24)(torch.zeros(1))
    with pytest.raises(NkiValidationError, match=r"num_elem_per_idx=3 must be one of"):
        local(num_elem=3)(torch.zeros(1))
    with pytest.raises(NkiValidationError, match=r"num_valid_indices=65 must be an integer "
                       "from 1 to 64"):
        local(valid=65)(torch.zeros(1))
    with pytest.raises(NkiValidationError, match=r"\[free-size-mismatch\].*= 64 elements"):
        local(dst_free=32)(torch.zeros(1))
    with pytest.raises(NkiValidationError, match=r"\[gather-index\].*holds 16 .* outside the 16 "
                       "groups of 1 element"):
        local(value=16)(torch.zeros(1))


def test_local_gather_warns_when_num_valid_indices_is_omitted():
    # NKI 0.8: the results are then undefined and NKI warns (a future default changes).
    @nki.jit
    def k(src, index, **valid):
        s, i = tile_in(src), tile_in(index)
        out = nl.ndarray((src.shape[0], 16 * index.shape[1]), src.dtype, buffer=nl.sbuf)
        nisa.local_gather(dst=out, src_buffer=s, index=i, **valid)
        return tile_out(out)

    src = torch.randn(16, 32)
    index = torch.randint(0, 32, (16, 2), dtype=torch.int32).to(torch.uint16)
    with pytest.warns(FutureWarning, match=r"nisa\.local_gather: num_valid_indices omitted"):
        k(src, index)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        k(src, index, num_valid_indices=32)
