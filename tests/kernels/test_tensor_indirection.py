"""NkiTensor.indirect (NeuronCore-v4 tensor indirection): compute instructions gather and scatter
columns of an on-chip tensor at offsets an SBUF uint16 tensor holds, partitions sharing offsets
in groups (16 on the Vector/Scalar/GpSimd Engines, 32 on the Tensor Engine, read in snake order
index[group_start + i % G, i // G]). Checked against a torch reference written from that
formula, and each rule with its error."""

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiValidationError
from tests.kernels.tiles import tile_in, tile_out


def offsets_of(index: torch.Tensor, partitions: int, count: int, group: int) -> torch.Tensor:
    """(partitions, count): offset i of partition p is index[p // G * G + i % G, i // G]."""
    i = torch.arange(count)
    rows = (torch.arange(partitions) // group * group).reshape(-1, 1) + i % group
    return index[rows, (i // group).expand(partitions, count)]


def uint16_tile(index):
    """An SBUF uint16 copy of an int32 HBM index tensor (the offsets are 16-bit)."""
    t = nl.ndarray(index.shape, nl.uint16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=tile_in(index))
    return t


def test_a_gather_reads_the_offsets_columns_for_one_partition_group():
    """16 partitions, index (16, 3): the default num_elem = index.size = 48 offsets."""
    @nki.jit(platform_target="trn3")
    def k(data, index):
        d, idx = tile_in(data), uint16_tile(index)
        out = nl.ndarray((16, 48), nl.float32, buffer=nl.sbuf)
        view = d.indirect(idx)
        assert view.shape == (16, 48) and view.is_indirect()
        nisa.tensor_copy(dst=out, src=view)
        return tile_out(out)

    data = torch.randn(16, 40)
    index = torch.randint(0, 40, (16, 3), dtype=torch.int32)
    expected = data.gather(1, offsets_of(index.long(), 16, 48, 16))
    torch.testing.assert_close(k(data, index), expected)


def test_each_group_of_16_partitions_reads_its_own_rows_of_the_index():
    """32 partitions are two groups; tensor_tensor takes the indirect view as an operand."""
    @nki.jit(platform_target="trn3")
    def k(data, index, other):
        d, idx, o = tile_in(data), uint16_tile(index), tile_in(other)
        out = nl.ndarray(other.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=out, data1=d.indirect(idx, num_elem=20), data2=o, op=nl.add)
        return tile_out(out)

    data, other = torch.randn(32, 64), torch.randn(32, 20)
    index = torch.randint(0, 64, (32, 2), dtype=torch.int32)
    expected = data.gather(1, offsets_of(index.long(), 32, 20, 16)) + other
    torch.testing.assert_close(k(data, index, other), expected)


def test_a_scatter_writes_only_the_offsets_columns():
    @nki.jit(platform_target="trn3")
    def k(data, index, values):
        d, idx, v = tile_in(data), uint16_tile(index), tile_in(values)
        nisa.tensor_scalar(dst=d.indirect(idx, num_elem=16), data=v, op0=nl.multiply,
                           operand0=2.0)
        return tile_out(d)

    data, values = torch.randn(16, 24), torch.randn(16, 16)
    index = torch.randperm(24)[:16].to(torch.int32).reshape(16, 1)
    expected = data.clone()
    expected[:, index.reshape(-1).long()] = 2.0 * values
    torch.testing.assert_close(k(data, index, values), expected)


def test_the_tensor_engine_groups_32_partitions():
    """nc_matmul's moving operand gathered with G = 32: all 32 partitions read index rows 0..31,
    where a Vector Engine instruction would give partitions 16..31 rows 16..31 of group two."""
    @nki.jit(platform_target="trn3")
    def k(stationary, data, index):
        s, d, idx = tile_in(stationary), tile_in(data), uint16_tile(index)
        out = nl.ndarray((8, 40), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=out, stationary=s, moving=d.indirect(idx, num_elem=40))
        result = nl.ndarray(out.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=result, src=out)
        return tile_out(result)

    stationary, data = torch.randn(32, 8), torch.randn(32, 50)
    index = torch.randint(0, 50, (32, 2), dtype=torch.int32)
    gathered = data.gather(1, offsets_of(index.long(), 32, 40, 32))
    torch.testing.assert_close(k(stationary, data, index), stationary.T @ gathered,
                               rtol=1e-4, atol=1e-4)


def run_view(body, index_dtype=nl.uint16, target="trn3"):
    """Runs body(data_tile, index_tile) in a kernel on a (32, 16) SBUF tile and a (32, 2) index."""
    @nki.jit(platform_target=target)
    def k(x):
        d = nl.ndarray((32, 16), nl.float32, buffer=nl.sbuf, name="data")
        nisa.memset(dst=d, value=0.0)
        idx = nl.ndarray((32, 2), index_dtype, buffer=nl.sbuf, name="idx")
        nisa.memset(dst=idx, value=3)
        body(d, idx)
        return tile_out(d)
    return k(torch.zeros(1))


def expect(rule, match, body, **kwargs):
    with pytest.raises(NkiValidationError, match=rf"\[{rule}\].*{match}"):
        run_view(body, **kwargs)


def test_indirection_needs_neuroncore_v4():
    expect("architecture", "needs NeuronCore-v4", lambda d, i: d.indirect(i), target="trn2")


def test_the_index_rules():
    expect("tensor-indirection", "must be uint16", lambda d, i: d.indirect(i),
           index_dtype=nl.int32)
    expect("tensor-indirection", r"must be \(32, K\)", lambda d, i: d.indirect(i[0:16, :]))
    expect("tensor-indirection", "must be an SBUF tensor", lambda d, i: d.indirect(3))
    expect("tensor-indirection", r"num_elem=65 must be in 1\.\.64",
           lambda d, i: d.indirect(i, num_elem=65))


def test_the_data_rules():
    def hbm_data(d, i):
        h = nl.ndarray((32, 16), nl.float32, buffer=nl.shared_hbm)
        h.indirect(i)

    expect("tensor-indirection", "addresses SBUF or PSUM tensors", hbm_data)
    expect("tensor-indirection", r"needs a \(partitions, free\) tensor",
           lambda d, i: d.reshape_dim(1, (4, 4)).indirect(i))
    expect("tensor-indirection", "cannot be re-indirected",
           lambda d, i: d.indirect(i, num_elem=4).indirect(i))
    expect("tensor-indirection", "cannot be sliced or viewed again",
           lambda d, i: d.indirect(i, num_elem=4)[:, 0:2])


def test_offsets_past_the_index_are_refused():
    """The default num_elem (index.size = 64) asks group one for offsets 32..63, which would
    come from index columns 2..3 of its (16-row) slice: the index has 2 columns."""
    def body(d, i):
        out = nl.ndarray((32, 64), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=d.indirect(i))

    expect("tensor-indirection", r"offset 32 of partition 0 comes from index row 0, column 2 "
           r"\(groups of 16 partitions", body)


def test_an_offset_outside_the_free_dimension_is_refused():
    def body(d, i):
        nisa.memset(dst=i, value=16)
        out = nl.ndarray((32, 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=d.indirect(i, num_elem=8))

    expect("indirect-offset", r"gives offset 16 .* whose size is 16", body)


def test_a_scatter_with_a_repeated_offset_is_refused():
    def body(d, i):
        src = nl.ndarray((32, 4), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=src, value=1.0)
        nisa.tensor_copy(dst=d.indirect(i, num_elem=4), src=src)  # every offset is 3

    expect("tensor-indirection", "repeats an offset of the partition group starting at "
           "partition 0", body)


def test_a_dma_refuses_an_indirection_view():
    def body(d, i):
        h = nl.ndarray((32, 4), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=h, src=d.indirect(i, num_elem=4))

    expect("tensor-indirection", r"nisa.dma_copy: src .* is a tensor-indirection view", body)
