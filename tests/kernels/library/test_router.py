"""router_topk: Mixtral's top-k routing (logits, renormalised scores, expert ids) against
transformers' MixtralTopKRouter formula on the CPU, forward and gradients."""

import importlib

import pytest
import torch

from torchneuron.kernels import library as kl
from torchneuron.kernels.library.router import router_topk_kernel

module = importlib.import_module("torchneuron.kernels.library.router")

from .compare import check_op

# (x shape, experts, k)
CASES = [((5, 16), 4, 2), ((2, 70, 32), 8, 2), ((130, 24), 6, 3)]


def _same_choice(ours, reference, probs):
    """The chosen experts carry the reference's top-k probabilities (ties may pick either)."""
    torch.testing.assert_close(probs.gather(1, ours.cpu()), probs.gather(1, reference))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("x_shape, experts, k", CASES)
def test_matches_the_reference(mode, x_shape, experts, k, dtype):
    x, w = torch.randn(x_shape).to(dtype), torch.randn(experts, x_shape[-1]).to(dtype)
    logits, _, indices = kl.router_topk_reference(x, w, k)
    ours = kl.router_topk(x.to("neuron"), w.to("neuron"), k)[2]
    assert ours.dtype == torch.int64
    _same_choice(ours, indices, torch.softmax(logits.float(), -1))
    check_op(lambda x, w: kl.router_topk(x, w, k)[:2],
             lambda x, w: kl.router_topk_reference(x, w, k)[:2], [x, w], differentiable=(0, 1))


def test_kernel_in_the_simulator_on_cpu_tensors():
    x, w = torch.randn(140, 16), torch.randn(8, 16)
    logits, probs, scores, indices = router_topk_kernel(x, w, 2)
    ref_logits, ref_scores, ref_indices = kl.router_topk_reference(x, w, 2)
    torch.testing.assert_close(logits, ref_logits)
    torch.testing.assert_close(probs, torch.softmax(ref_logits, -1))
    torch.testing.assert_close(scores, ref_scores)
    assert torch.equal(indices.long(), ref_indices)


@pytest.mark.parametrize("experts, k", [(20, 10), (3, 3), (64, 8)])
def test_kernel_selects_eight_at_a_time(experts, k):
    """More than 8 chosen (two rounds of max8 + nc_match_replace8), fewer than 8 experts (a
    padded row) and exactly 8 of many, against torch.topk."""
    x, w = torch.randn(40, 16), torch.randn(experts, 16)
    _, _, scores, indices = router_topk_kernel(x, w, k)
    _, ref_scores, ref_indices = kl.router_topk_reference(x, w, k)
    torch.testing.assert_close(scores, ref_scores)
    assert torch.equal(indices.long(), ref_indices)


def test_errors():
    x, w = torch.randn(4, 8, device="neuron"), torch.randn(3, 8, device="neuron")
    with pytest.raises(ValueError, match="k=4 must be an integer between 1 and the 3 experts"):
        kl.router_topk(x, w, 4)
    with pytest.raises(ValueError, match=r"w_router \(3, 7\) torch.float32 must be \(experts, 8\)"):
        kl.router_topk(x, w[:, :7], 1)
    with pytest.raises(TypeError, match="router_topk: x has dtype torch.int64"):
        kl.router_topk(x.long(), w, 1)
    with pytest.raises(RuntimeError, match="router_topk: w_router is on cpu"):
        kl.router_topk(x, w.cpu(), 1)


def test_backward_scatter_kernel_in_the_simulator_matches_the_composite():
    """d(loss)/d(probs) scattered to the selected experts, as an NKI kernel on CPU tensors:
    two row tiles, k = 3."""
    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(140, 8, generator=g), -1)
    scores, indices = torch.topk(probs, 3, dim=-1)
    scores = scores / scores.sum(-1, keepdim=True)
    d_scores = torch.randn(140, 3, generator=g)
    dense = module.router_dense_dp_kernel(d_scores, scores, indices.float(), probs)
    torch.testing.assert_close(dense, module._dense_dp(d_scores, scores, indices, probs))


def test_simulate_mode_scatters_in_nki(monkeypatch, simulate):
    calls = []
    kernel = module.router_dense_dp_kernel
    monkeypatch.setattr(module, "router_dense_dp_kernel",
                        lambda *a: calls.append(1) or kernel(*a))
    x, w = torch.randn(20, 16), torch.randn(6, 16)
    check_op(lambda x, w: kl.router_topk(x, w, 2)[:2],
             lambda x, w: kl.router_topk_reference(x, w, 2)[:2], [x, w], differentiable=(0, 1))
    assert calls == [1]
