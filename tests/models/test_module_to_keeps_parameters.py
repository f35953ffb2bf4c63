"""Bug class found by the model battery: `Module.to("neuron")` replaced every Parameter by a new
one, so tied weights (GPT-2's lm_head and wte, BERT's decoder and word embeddings) came apart
on neuron: gradients differed from the CPU's and training diverged. Fixed by the neuron kernel of
aten::_has_compatible_shallow_copy_type (csrc/aten/native/ShallowCopy.cpp)."""

import pytest
import torch


def tied_model() -> torch.nn.Module:
    m = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    m[1].weight = m[0].weight
    return m


def test_to_neuron_keeps_tied_weights_tied():
    m = tied_model()
    m.to("neuron")
    assert m[0].weight is m[1].weight
    assert m[0].weight.device.type == "neuron"
    assert len(list(m.parameters())) == 1


def test_to_neuron_keeps_parameter_identity_so_an_earlier_optimizer_still_works():
    m = torch.nn.Linear(3, 2)
    before = list(m.parameters())
    m.to("neuron")
    assert all(a is b for a, b in zip(before, m.parameters()))
    m.to("cpu")
    assert all(a is b for a, b in zip(before, m.parameters()))
    assert m.weight.device.type == "cpu"


def test_tied_model_gradients_match_cpu():
    cpu = tied_model()
    dev = tied_model()
    dev.load_state_dict(cpu.state_dict())
    dev.to("neuron")
    x = torch.tensor([[1, 2, 3], [4, 5, 6]])
    cpu(x).pow(2).mean().backward()
    dev(x.to("neuron")).pow(2).mean().backward()
    torch.testing.assert_close(dev[0].weight.grad.cpu(), cpu[0].weight.grad)


def test_data_assignment_between_cpu_and_neuron():
    t = torch.zeros(3)
    t.data = torch.ones(3, device="neuron")
    assert t.device.type == "neuron"
    torch.testing.assert_close((t + 1).cpu(), torch.full((3,), 2.0))


def test_data_assignment_still_rejects_incompatible_layouts():
    t = torch.zeros(3, 3, device="neuron")
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        t.data = torch.eye(3).to_sparse()
