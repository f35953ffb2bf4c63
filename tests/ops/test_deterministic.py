"""torch.use_deterministic_algorithms(True) with fill_uninitialized_memory (the default): new
memory on neuron holds NaN (floating, complex) or the integer maximum, as on the CPU."""

import pytest
import torch

MAKERS = {
    "empty": lambda dt, d: torch.empty(5, dtype=dt, device=d),
    "empty_like": lambda dt, d: torch.empty_like(torch.zeros(5, dtype=dt, device=d)),
    "empty_strided": lambda dt, d: torch.empty_strided((2, 3), (1, 2), dtype=dt, device=d),
    "new_empty": lambda dt, d: torch.zeros(1, dtype=dt, device=d).new_empty(5),
    "resize_": lambda dt, d: torch.zeros(2, dtype=dt, device=d).resize_(7),
}


@pytest.fixture
def deterministic():
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.complex64, torch.int64,
                                   torch.uint8, torch.bool])
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_new_memory_is_filled_as_on_the_cpu(deterministic, name, dtype):
    cpu = MAKERS[name](dtype, "cpu")
    neuron = MAKERS[name](dtype, "neuron").cpu()
    torch.testing.assert_close(neuron, cpu, equal_nan=True)


def test_fill_can_be_turned_off(deterministic):
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        torch.empty(3, device="neuron")  # runs; contents unspecified, as on the CPU
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = True


# Ops whose CUDA kernels are nondeterministic (atomics, scatter accumulation, pooling and
# interpolation backward): on neuron they are the CPU's kernels, which raise under
# use_deterministic_algorithms(True) exactly where the CPU's do (put_ here), and otherwise run
# and give the same bits every time.
def _idx(d):
    return torch.tensor([0, 2, 2, 1], device=d)


def _grad_of(fn, shape, d):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(3)).to(d).requires_grad_()
    fn(x).sum().backward()
    return x.grad


OPS_CUDA_MAKES_NONDETERMINISTIC = {
    "index_add_": lambda d: torch.zeros(4, 3, device=d).index_add_(0, _idx(d), torch.ones(4, 3, device=d)),
    "index_put_accumulate": lambda d: torch.zeros(4, device=d).index_put_(
        (_idx(d),), torch.arange(4.0, device=d), accumulate=True),
    "put_": lambda d: torch.zeros(4, device=d).put_(_idx(d), torch.ones(4, device=d)),
    "scatter_add_": lambda d: torch.zeros(4, device=d).scatter_add_(0, _idx(d), torch.ones(4, device=d)),
    "scatter_reduce_": lambda d: torch.zeros(4, device=d).scatter_reduce_(
        0, _idx(d), torch.arange(4.0, device=d), "sum"),
    "bincount": lambda d: torch.bincount(_idx(d)),
    "histc": lambda d: torch.histc(torch.linspace(-1, 1, 9, device=d), bins=4),
    "kthvalue": lambda d: torch.kthvalue(torch.tensor([[3.0, 1.0], [2.0, 5.0]], device=d), 1, 0)[0],
    "median": lambda d: torch.median(torch.tensor([[3.0, 1.0], [2.0, 5.0]], device=d), 0)[0],
    "cumsum": lambda d: torch.cumsum(torch.arange(6.0, device=d), 0),
    "embedding_bag_max": lambda d: torch.nn.functional.embedding_bag(
        _idx(d), torch.arange(12.0, device=d).view(4, 3), torch.tensor([0, 2], device=d), mode="max"),
    "max_pool3d_backward": lambda d: _grad_of(
        lambda x: torch.nn.functional.max_pool3d(x, 2), (1, 1, 4, 4, 4), d),
    "avg_pool3d_backward": lambda d: _grad_of(
        lambda x: torch.nn.functional.avg_pool3d(x, 2), (1, 1, 4, 4, 4), d),
    "interpolate_bilinear_backward": lambda d: _grad_of(
        lambda x: torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear"),
        (1, 1, 4, 4), d),
    "gather_backward": lambda d: _grad_of(lambda x: torch.gather(x, 0, _idx(d)), (4,), d),
    "index_select_backward": lambda d: _grad_of(lambda x: x.index_select(0, _idx(d)), (4, 4), d),
}


@pytest.mark.parametrize("name", sorted(OPS_CUDA_MAKES_NONDETERMINISTIC))
def test_deterministic_mode_raises_where_the_cpu_raises_and_repeats_bits(deterministic, name):
    op = OPS_CUDA_MAKES_NONDETERMINISTIC[name]
    try:
        expected = op("cpu")
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as on_neuron:
            op("neuron")
        assert str(on_neuron.value) == str(e)
        assert "does not have a deterministic implementation" in str(e)
        return
    first, second = op("neuron").cpu(), op("neuron").cpu()
    torch.testing.assert_close(first, expected)
    assert torch.equal(first, second)


def test_put_is_the_one_op_here_the_cpu_refuses():
    # The list above is not vacuous: one of its ops does raise.
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError, match="put_ does not have a deterministic"):
            OPS_CUDA_MAKES_NONDETERMINISTIC["put_"]("neuron")
    finally:
        torch.use_deterministic_algorithms(False)
