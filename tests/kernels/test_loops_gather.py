"""nl.fori_loop and nl.while_loop (register-driven loops of the newest reference) and
nl.gather_flattened, against torch references, and their rules."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiValidationError


def test_fori_loop_with_a_runtime_bound_copies_a_prefix():
    """The reference's example: a loop bound loaded from memory into a register, the induction
    register used as a scalar_offset of an indirect access pattern."""
    @nki.jit
    def k(data, ub_input):
        N = data.shape[1]
        output = nl.ndarray((1, N), nl.float32, buffer=nl.shared_hbm)
        ub_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=ub_sb, src=ub_input)
        ub_reg = nisa.register_alloc()
        nisa.register_load(ub_reg, ub_sb)
        zeros = nl.zeros((1, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=output, src=zeros)
        temp = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)

        def body(i):
            nisa.dma_copy(dst=temp, src=data.ap([[1, 1], [1, 1]], scalar_offset=i,
                                                indirect_dim=1))
            nisa.dma_copy(dst=output.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1),
                          src=temp)

        nl.fori_loop(0, ub_reg, body)
        return output

    data = torch.randn(1, 12)
    out = k(data, torch.tensor([[7]], dtype=torch.int32))
    ref = torch.zeros(1, 12)
    ref[0, :7] = data[0, :7]
    torch.testing.assert_close(out, ref)


def test_fori_loop_steps_and_the_induction_register_is_by_value():
    seen = []

    @nki.jit
    def k(x):
        def body(i):
            seen.append(int(i))
            nisa.register_move(i, 100)  # no effect on the loop
        nl.fori_loop(2, nisa.register_alloc(11), body, step=3)  # a register bound: i a register
        return x

    k(torch.zeros(1))
    assert seen == [2, 5, 8]


def test_while_loop_counts_down_as_documented():
    @nki.jit
    def k(data, count_input):
        val = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=val, src=data)
        acc = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        count_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=count_sb, src=count_input)
        one_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=one_sb, value=1)
        reg = nisa.register_alloc()
        nisa.register_load(reg, count_sb)

        def body(r):
            nisa.tensor_tensor(dst=acc, data1=acc, data2=val, op=nl.add)
            nisa.tensor_tensor(dst=count_sb, data1=count_sb, data2=one_sb, op=nl.subtract)
            nisa.register_load(r, count_sb)
            return r

        nl.while_loop(reg, body)
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc)
        return out

    torch.testing.assert_close(k(torch.tensor([[1.5]]), torch.tensor([[5]], dtype=torch.int32)),
                               torch.tensor([[7.5]]))
    # init zero: a true while, the body never runs
    torch.testing.assert_close(k(torch.tensor([[1.5]]), torch.tensor([[0]], dtype=torch.int32)),
                               torch.tensor([[0.0]]))


def test_loop_rules():
    def step(x):
        nl.fori_loop(0, 4, lambda i: None, step=0)

    with pytest.raises(NkiValidationError, match=r"\[control-flow\].*step=0 must be a compile-time "
                       "positive integer"):
        nki.jit(step)(torch.zeros(1))

    def bound(x):
        nl.fori_loop(0, 2.5, lambda i: None)

    with pytest.raises(NkiValidationError, match=r"upper=2.5 must be an int or an nl.int32 "
                       "NkiScalar"):
        nki.jit(bound)(torch.zeros(1))

    def init(x):
        nl.while_loop(2.5, lambda r: r)

    with pytest.raises(NkiValidationError, match=r"init=2.5 must be an int or an nl.int32"):
        nki.jit(init)(torch.zeros(1))

    def returns(x):
        nl.while_loop(nisa.register_alloc(1), lambda r: None)

    with pytest.raises(NkiValidationError, match=r"body_fun returned None"):
        nki.jit(returns)(torch.zeros(1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_gather_flattened_matches_take_along_axis(dtype):
    @nki.jit
    def k(data, indices):
        d = nl.load(data)
        i = nl.load(indices)
        out = nl.ndarray(indices.shape, data.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.gather_flattened(d, i))
        return out

    data = (torch.randn(32, 8, 8) * 1000).to(dtype)
    indices = torch.randint(0, 64, (32, 10)).to(torch.uint32)
    ref = np.take_along_axis(data.float().reshape(32, -1).numpy(),
                             indices.to(torch.int64).numpy(), axis=-1)
    torch.testing.assert_close(k(data, indices).float(), torch.from_numpy(ref))


def test_gather_flattened_documented_example_and_dtype_cast():
    @nki.jit
    def k(data, indices):
        out = nl.ndarray(indices.shape, nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(out, nl.gather_flattened(nl.load(data), nl.load(indices), dtype=nl.bfloat16))
        return out

    data = torch.tensor([[[1., 2.], [3., 4.]], [[5., 6.], [7., 8.]]])
    indices = torch.tensor([[[0, 1], [1, 3]], [[3, 3], [1, 0]]]).to(torch.uint32)
    torch.testing.assert_close(
        k(data, indices), torch.tensor([[[1., 2.], [2., 4.]], [[8., 8.], [6., 5.]]]).bfloat16())


def test_gather_flattened_rules():
    def past(x):
        d = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf, name="data")
        i = nl.ndarray((4, 2), nl.uint32, buffer=nl.sbuf, name="idx")
        nisa.memset(dst=d, value=0.0)
        nisa.memset(dst=i, value=8)
        nl.gather_flattened(d, i)

    with pytest.raises(NkiValidationError, match=r"\[gather-index\].*indices 'idx' \(sbuf, shape "
                       r"\(4, 2\), uint32\) hold 8 at partition 0, past data 'data' \(sbuf, "
                       r"shape \(4, 8\), float32\)'s 8 elements per partition"):
        nki.jit(past)(torch.zeros(1))

    def dtype(x):
        d = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        i = nl.ndarray((4, 2), nl.int32, buffer=nl.sbuf)
        nl.gather_flattened(d, i)

    with pytest.raises(NkiValidationError, match=r"\[operand-dtype\].*must be uint32"):
        nki.jit(dtype)(torch.zeros(1))

    def partitions(x):
        d = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        i = nl.ndarray((2, 2), nl.uint32, buffer=nl.sbuf)
        nl.gather_flattened(d, i)

    with pytest.raises(NkiValidationError, match=r"\[partition-mismatch\]"):
        nki.jit(partitions)(torch.zeros(1))
