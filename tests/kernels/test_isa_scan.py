"""nisa.tensor_scalar_cumulative, sequence_bounds and nonzero_with_count against numpy
references written from nki.isa's documented pseudocode, and the rules each brings."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiValidationError
from tests.kernels.tiles import tile_in, tile_out


NP_OPS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
          "maximum": np.maximum, "minimum": np.minimum}
RESET = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


def reference_cumulative(x, op0, imm0, op1, start):
    """The documented loop: reg = op1(op0(x[i], imm0), reg); out[i] = reg (float32)."""
    x = x.astype(np.float32)
    out = np.empty_like(x)
    reg = np.asarray(start, dtype=np.float32).reshape(-1).copy()
    for i in range(x.shape[1]):
        reg = NP_OPS[op1](NP_OPS[op0](x[:, i], np.float32(imm0)), reg).astype(np.float32)
        out[:, i] = reg
    return out


@pytest.mark.parametrize("op1", ["add", "subtract", "multiply", "maximum", "minimum"])
def test_tensor_scalar_cumulative_reset_matches_the_documented_loop(op1):
    @nki.jit
    def k(x):
        xs = tile_in(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=out, src=xs, op0=nl.multiply, op1=getattr(nl, op1),
                                      imm0=0.5)
        return tile_out(out)

    x = torch.rand(16, 40) + 0.5
    ref = reference_cumulative(x.numpy(), "multiply", 0.5, op1, np.full(16, RESET[op1]))
    torch.testing.assert_close(k(x), torch.from_numpy(ref), rtol=1e-5, atol=1e-5)


def test_tensor_scalar_cumulative_chains_through_the_accumulator():
    """load_reduce starts from imm1 (a per-partition vector), reduce continues from the last
    value: two half tiles give the cumulative sum of the whole."""
    @nki.jit
    def k(x, init):
        a, b = tile_in(x[:, 0:32]), tile_in(x[:, 32:64])
        i = tile_in(init)
        out = nl.ndarray((x.shape[0], 64), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=out[:, 0:32], src=a, op0=nl.add, op1=nl.add,
                                      imm0=1.0, imm1=i, reduce_cmd=nisa.reduce_cmd.load_reduce)
        nisa.tensor_scalar_cumulative(dst=out[:, 32:64], src=b, op0=nl.add, op1=nl.add,
                                      imm0=1.0, reduce_cmd=nisa.reduce_cmd.reduce)
        return tile_out(out)

    x = torch.randn(8, 64)
    init = torch.randn(8, 1)
    ref = reference_cumulative(x.numpy(), "add", 1.0, "add", init.numpy())
    torch.testing.assert_close(k(x, init), torch.from_numpy(ref), rtol=1e-5, atol=1e-4)


def test_tensor_scalar_cumulative_casts_to_bfloat16_dst():
    @nki.jit
    def k(x):
        xs = tile_in(x)
        out = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=out, src=xs, op0=nl.add, op1=nl.maximum, imm0=0.0)
        return tile_out(out)

    x = torch.randn(4, 30).bfloat16()
    ref = torch.cummax(x.float(), dim=1).values.bfloat16()
    torch.testing.assert_close(k(x), ref)


def test_tensor_scalar_cumulative_rules():
    def bad_dtype(x):
        t = nl.ndarray((4, 8), nl.int32, buffer=nl.sbuf, name="ints")
        nisa.tensor_scalar_cumulative(dst=t, src=t, op0=nl.add, op1=nl.add, imm0=0.0)

    with pytest.raises(NkiValidationError, match=r"\[operand-dtype\].*dst 'ints' \(sbuf, "
                       r"shape \(4, 8\), int32\) must be one of"):
        nki.jit(bad_dtype)(torch.zeros(1))

    def bad_op(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=t, src=t, op0=nl.add, op1=nl.divide, imm0=0.0)

    with pytest.raises(NkiValidationError, match=r"\[operator\].*op1=nl.divide must be"):
        nki.jit(bad_op)(torch.zeros(1))

    def missing_imm1(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=t, src=t, op0=nl.add, op1=nl.add, imm0=0.0,
                                      reduce_cmd=nisa.reduce_cmd.load_reduce)

    with pytest.raises(NkiValidationError, match=r"imm1 is given exactly when"):
        nki.jit(missing_imm1)(torch.zeros(1))

    def idle(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=t, src=t, op0=nl.add, op1=nl.add, imm0=0.0,
                                      reduce_cmd=nisa.reduce_cmd.idle)

    with pytest.raises(NkiValidationError, match=r"reduce_cmd=.*idle.* must be"):
        nki.jit(idle)(torch.zeros(1))

    def sizes(x):
        a = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((4, 9), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=a, src=b, op0=nl.add, op1=nl.add, imm0=0.0)

    with pytest.raises(NkiValidationError, match=r"\[free-size-mismatch\]"):
        nki.jit(sizes)(torch.zeros(1))


def reference_bounds(seq):
    """nki.isa.sequence_bounds' documented numpy equivalent."""
    n = len(seq)
    lo, hi = np.zeros(n), np.zeros(n)
    lo[0] = 0 if seq[0] != 0 else n
    for i in range(1, n):
        lo[i] = n if seq[i] == 0 else (lo[i - 1] if seq[i] == seq[i - 1] else i)
    hi[-1] = n if seq[-1] != 0 else -1
    for i in range(n - 2, -1, -1):
        hi[i] = -1 if seq[i] == 0 else (hi[i + 1] if seq[i] == seq[i + 1] else i + 1)
    return np.vstack((lo, hi))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_sequence_bounds_matches_the_documented_numpy(dtype):
    @nki.jit
    def k(ids):
        s = tile_in(ids)
        out = nl.ndarray((1, 2, ids.shape[1]), ids.dtype, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=out, segment_ids=s)
        return tile_out(out)

    # Packed sequences: runs of ids, padding (0) between and at the end, a run at the start.
    seq = np.array([3, 3, 1, 1, 1, 0, 0, 2, 5, 5, 5, 5, 0, 7, 7, 0], dtype=np.float32)
    seq = np.concatenate([seq, np.repeat(np.arange(1, 7), 8), np.zeros(4)])
    ids = torch.from_numpy(seq).reshape(1, -1).to(dtype)
    ref = torch.from_numpy(reference_bounds(seq)).reshape(1, 2, -1).to(dtype)
    torch.testing.assert_close(k(ids), ref)
    # A tile that ends inside a run: its end is n.
    ids = torch.tensor([[0, 4, 4, 4]], dtype=dtype)
    ref = torch.from_numpy(reference_bounds([0, 4, 4, 4])).reshape(1, 2, -1).to(dtype)
    torch.testing.assert_close(k(ids), ref)


def test_sequence_bounds_rules():
    def partitions(x):
        s = nl.ndarray((2, 8), nl.float32, buffer=nl.sbuf, name="ids")
        d = nl.ndarray((2, 16), nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=d, segment_ids=s)

    with pytest.raises(NkiValidationError, match=r"\[operand-shape\].*segment_ids 'ids' "
                       r"\(sbuf, shape \(2, 8\), float32\) must have 1 partition"):
        nki.jit(partitions)(torch.zeros(1))

    def dst_size(x):
        s = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((1, 8), nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=d, segment_ids=s)

    with pytest.raises(NkiValidationError, match=r"must be \(1, 2, 8\)"):
        nki.jit(dst_size)(torch.zeros(1))

    def dtype(x):
        s = nl.ndarray((1, 8), nl.bfloat16, buffer=nl.sbuf)
        d = nl.ndarray((1, 16), nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=d, segment_ids=s)

    with pytest.raises(NkiValidationError, match=r"\[operand-dtype\].*must be float32 or int32"):
        nki.jit(dtype)(torch.zeros(1))

    def psum(x):
        s = nl.ndarray((1, 8), nl.float32, buffer=nl.psum)
        d = nl.ndarray((1, 16), nl.float32, buffer=nl.sbuf)
        nisa.sequence_bounds(dst=d, segment_ids=s)

    with pytest.raises(NkiValidationError, match=r"\[memory-access\].*PSUM"):
        nki.jit(psum)(torch.zeros(1))


def test_nonzero_with_count_matches_the_documented_example_and_numpy():
    @nki.jit
    def k(x, before):
        xs = tile_in(x)
        out = tile_in(before)  # partitions the instruction does not write keep these values
        nisa.nonzero_with_count(dst=out, src=xs, index_offset=16, padding_val=-1)
        return tile_out(out)

    x = (torch.rand(128, 24) > 0.6).float() * torch.randn(128, 24)
    x[0, :8] = torch.tensor([0, 1, 1, 0, 0, 1, 0, 0.])
    x[0, 8:] = 0
    x[16] = 0  # no nonzero: all padding, count 0
    before = torch.full((128, 25), 99, dtype=torch.int32)
    out = k(x, before)
    ref = before.clone()
    for p in range(0, 128, 16):
        idx = np.nonzero(x[p].numpy())[0] + 16
        row = np.full(25, -1)
        row[:len(idx)] = idx
        row[24] = len(idx)
        ref[p] = torch.from_numpy(row)
    assert out[0, :4].tolist() == [17, 18, 21, -1] and out[0, 24] == 3
    torch.testing.assert_close(out, ref)


def test_nonzero_with_count_rules():
    def size(x):
        s = nl.ndarray((16, 8), nl.float32, buffer=nl.sbuf, name="src")
        d = nl.ndarray((16, 8), nl.int32, buffer=nl.sbuf, name="dst")
        nisa.nonzero_with_count(dst=d, src=s)

    with pytest.raises(NkiValidationError, match=r"\[operand-shape\].*dst 'dst' \(sbuf, shape "
                       r"\(16, 8\), int32\) must be 2-D with one element more .* \(16, 9\)"):
        nki.jit(size)(torch.zeros(1))

    def dst_dtype(x):
        s = nl.ndarray((16, 8), nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((16, 9), nl.float32, buffer=nl.sbuf)
        nisa.nonzero_with_count(dst=d, src=s)

    with pytest.raises(NkiValidationError, match=r"\[operand-dtype\].*must be int32"):
        nki.jit(dst_dtype)(torch.zeros(1))

    def offset(x):
        s = nl.ndarray((16, 8), nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((16, 9), nl.int32, buffer=nl.sbuf)
        nisa.nonzero_with_count(dst=d, src=s, index_offset=0.5)

    with pytest.raises(NkiValidationError, match=r"index_offset=0.5 must be an int32"):
        nki.jit(offset)(torch.zeros(1))
