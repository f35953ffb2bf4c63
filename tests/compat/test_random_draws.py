"""The model battery gives a model's random draws from its CPU run to its neuron run
(torchneuron/compat/random_draws.py): the neuron generator's stream differs from the CPU's for
one seed (Philox-shaped, as CUDA's), so without this a model that draws in forward compares two
different samples."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from torchneuron.compat.judge import Mismatch
from torchneuron.compat.random_draws import RandomDraws


class Noisy(torch.nn.Module):
    """Draws the ways models do: rand (stochastic depth), in-place uniform_ (router jitter),
    exponential_ (Gumbel noise), randperm (MAE's shuffle) and dropout in training."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.linear(x)
        keep = torch.rand(x.shape[0], 1, device=x.device) > 0.3
        h = h * keep * torch.empty_like(h).uniform_(0.9, 1.1)
        gumbel = -torch.empty_like(h).exponential_().log()
        order = torch.randperm(h.shape[1], device=x.device)
        return F.dropout(h + gumbel, p=0.25, training=True)[:, order]


def _run(model, x, device, draws, phase):
    model = model.to(device)
    model.zero_grad(set_to_none=True)
    torch.manual_seed(0)
    with getattr(draws, phase)():
        out = model(x.to(device))
        out.pow(2).sum().backward()
    return out, model.linear.weight.grad


def test_neuron_gets_the_cpus_draws_and_matches_it():
    cpu_model = Noisy()
    dev_model = Noisy()
    dev_model.load_state_dict(cpu_model.state_dict())
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    draws = RandomDraws()
    cpu_out, cpu_grad = _run(cpu_model, x, "cpu", draws, "recording")
    assert len(draws) == 5  # rand, uniform_, exponential_, randperm, dropout's bernoulli_
    dev_out, dev_grad = _run(dev_model, x, "neuron", draws, "replaying")
    assert dev_out.device.type == "neuron"
    assert_close(dev_out.cpu(), cpu_out.detach())
    assert_close(dev_grad.cpu(), cpu_grad)


def test_without_the_cpus_draws_the_neuron_sample_differs():
    # Why the battery needs them: the same seed gives another stream on neuron.
    torch.manual_seed(0)
    cpu = torch.rand(64)
    torch.manual_seed(0)
    dev = torch.rand(64, device="neuron").cpu()
    assert not torch.equal(cpu, dev)


def test_draws_from_an_explicit_generator_are_the_callers_inputs_not_recorded():
    draws = RandomDraws()
    with draws.recording():
        torch.randn(3, generator=torch.Generator().manual_seed(0))
        torch.rand(2)
    assert len(draws) == 1


def test_no_cpu_draws_means_no_dispatch_mode_on_neuron():
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    draws = RandomDraws()
    with draws.recording():
        assert _get_current_dispatch_mode() is not None
        torch.ones(2) * 2
    assert len(draws) == 0
    with draws.replaying():
        assert _get_current_dispatch_mode() is None  # the neuron run is left as it is


def _recorded(fn):
    draws = RandomDraws()
    with draws.recording():
        fn("cpu")
    return draws


def test_a_neuron_run_that_draws_more_is_a_mismatch():
    draws = _recorded(lambda d: torch.rand(3, device=d))
    with pytest.raises(Mismatch, match="neuron drew aten.rand.default after the CPU's 1 draws"):
        with draws.replaying():
            torch.rand(3, device="neuron")
            torch.rand(3, device="neuron")


def test_a_neuron_run_that_draws_less_is_a_mismatch():
    draws = _recorded(lambda d: (torch.rand(3, device=d), torch.randn(2, device=d)))
    with pytest.raises(Mismatch, match=r"neuron drew 1 times, the CPU 2 \(next: aten.randn"):
        with draws.replaying():
            torch.rand(3, device="neuron")


def test_another_shape_or_op_is_a_mismatch():
    draws = _recorded(lambda d: torch.rand(3, device=d))
    with pytest.raises(Mismatch, match=r"draw 1 is aten.rand.default \[\(4,\)\], the CPU's "
                                       r"aten.rand.default \[\(3,\)\]"):
        with draws.replaying():
            torch.rand(4, device="neuron")
    with pytest.raises(Mismatch, match=r"draw 1 is aten.randn.default"):
        with draws.replaying():
            torch.randn(3, device="neuron")


def test_dropout_of_another_shape_than_the_cpus_noise_is_a_mismatch():
    draws = _recorded(lambda d: F.dropout(torch.ones(4, device=d), p=0.5))
    with pytest.raises(Mismatch, match=r"neuron's dropout of \(5,\) where the CPU drew noise "
                                       r"of \(4,\)"):
        with draws.replaying():
            F.dropout(torch.ones(5, device="neuron"), p=0.5)


def test_attention_without_dropout_is_not_a_draw():
    # The CPU's flash-attention kernel is tagged as seeded (for its dropout); neuron runs another
    # kernel. At dropout_p == 0 neither draws, so a training step records nothing.
    q = torch.randn(1, 2, 4, 8, requires_grad=True)
    draws = RandomDraws()
    with draws.recording():
        F.scaled_dot_product_attention(q, q, q).sum().backward()
    assert len(draws) == 0
    with draws.recording():
        torch.nn.functional.dropout(q, p=0.1)  # a draw among the attention kernels is kept
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, q, q, dropout_p=0.0)
    assert [name for name, _ in draws.draws] == ["aten.bernoulli_.float"]
