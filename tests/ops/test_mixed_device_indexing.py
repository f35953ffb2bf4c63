"""Advanced indexing across devices behaves as on CUDA: a neuron tensor may be indexed with CPU
index tensors (and given CPU values), and a CPU tensor indexed with neuron indices raises CUDA's
IndexError ("indices should be either on cpu or on the same device as the indexed tensor (cpu)")
instead of returning a neuron tensor. Every entry point reaches the same ops (index, index_put_,
_index_put_impl_), so each is tried."""

import pytest
import torch

ON_CPU = r"indices should be either on cpu or on the same device as the indexed tensor \(cpu\)"


def _cpu_x():
    return torch.arange(12.0).reshape(3, 4)


INDEXED_ON_THE_CPU = {
    "x[idx]": lambda x, i, m: x[i],
    "x[:, idx]": lambda x, i, m: x[:, i],
    "x[idx, idx]": lambda x, i, m: x[i, i],
    "x[mask]": lambda x, i, m: x[m],
    "x[idx] = scalar": lambda x, i, m: x.__setitem__(i, 7.0),
    "x[:, idx] = tensor": lambda x, i, m: x.__setitem__((slice(None), i), torch.ones(3, 2)),
    "x[mask] = scalar": lambda x, i, m: x.__setitem__(m, 7.0),
    "index_put_": lambda x, i, m: x.index_put_((i,), torch.tensor(7.0)),
    "index_put_ accumulate": lambda x, i, m: x.index_put_((i,), torch.ones(2, 4), accumulate=True),
    "index_put": lambda x, i, m: torch.index_put(x, (i,), torch.tensor(7.0)),
    "aten.index": lambda x, i, m: torch.ops.aten.index(x, [i]),
}


@pytest.mark.parametrize("name", sorted(INDEXED_ON_THE_CPU))
def test_a_cpu_tensor_indexed_with_neuron_indices_raises_as_on_cuda(name):
    x = _cpu_x()
    before = x.clone()
    idx = torch.tensor([0, 2], device="neuron")
    mask = torch.tensor([True, False, True], device="neuron")
    with pytest.raises(IndexError, match=ON_CPU):
        INDEXED_ON_THE_CPU[name](x, idx, mask)
    torch.testing.assert_close(x, before)  # nothing written


INDEXED_ON_NEURON = {
    "x[idx]": lambda x, i, m: x[i],
    "x[:, idx]": lambda x, i, m: x[:, i],
    "x[idx, idx]": lambda x, i, m: x[i, i],
    "x[mask]": lambda x, i, m: x[m],
    "x[idx] = scalar": lambda x, i, m: x.__setitem__(i, 7.0) or x,
    "x[mask] = scalar": lambda x, i, m: x.__setitem__(m, 7.0) or x,
    "index_put_ accumulate": lambda x, i, m: x.index_put_((i,), torch.tensor(2.0), accumulate=True),
    "aten.index": lambda x, i, m: torch.ops.aten.index(x, [i]),
}


@pytest.mark.parametrize("index_device", ["cpu", "neuron"])
@pytest.mark.parametrize("name", sorted(INDEXED_ON_NEURON))
def test_a_neuron_tensor_takes_cpu_or_neuron_indices(name, index_device):
    idx, mask = torch.tensor([0, 2]), torch.tensor([True, False, True])
    expected = INDEXED_ON_NEURON[name](_cpu_x(), idx, mask)
    got = INDEXED_ON_NEURON[name](_cpu_x().to("neuron"), idx.to(index_device),
                                  mask.to(index_device))
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), expected)


def test_a_zero_dim_neuron_index_selects_as_on_cuda():
    # Python indexing reads a 0-dim integer index as an int (a sync on CUDA): no device mix.
    x = _cpu_x()
    torch.testing.assert_close(x[torch.tensor(1, device="neuron")], x[1])


def test_cpu_values_written_into_a_cpu_tensor_with_neuron_indices_raise():
    x = _cpu_x()
    with pytest.raises(IndexError, match=ON_CPU):
        x.index_put_((torch.tensor([0], device="neuron"),), torch.ones(1, 4))


def test_neuron_values_written_into_a_cpu_tensor_raise():
    x = _cpu_x()
    with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device"):
        x.index_put_((torch.tensor([0]),), torch.ones(1, 4, device="neuron"))
    torch.testing.assert_close(x, _cpu_x())


def test_indices_on_another_neuron_device_raise():
    if torch.neuron.device_count() < 2:
        pytest.skip("needs two neuron devices")
    x = _cpu_x().to("neuron:0")
    with pytest.raises(IndexError, match=r"same device as the indexed tensor \(neuron:0\)"):
        x[torch.tensor([0, 2], device="neuron:1")]
