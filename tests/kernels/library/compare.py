"""Runs a library op on neuron and its plain PyTorch reference on the CPU, forward and backward,
and compares outputs and gradients with tolerances for the dtype: float32 as PyTorch's
assert_close, bfloat16 within 1% of the largest magnitude (a kernel that accumulates in float32
rounds differently from the CPU's bfloat16 ops, by an ulp or so)."""

from __future__ import annotations

import torch


def tolerances(reference: torch.Tensor) -> dict:
    scale = max(1.0, reference.detach().float().abs().max().item()) if reference.numel() else 1.0
    if reference.dtype == torch.bfloat16:
        return dict(atol=1e-2 * scale, rtol=1.6e-2)
    return dict(atol=1e-5 * scale, rtol=1e-5)


def assert_close(actual: torch.Tensor, expected: torch.Tensor, what: str = "") -> None:
    assert actual.device.type == "neuron", f"{what}: result on {actual.device}"
    torch.testing.assert_close(actual.detach().cpu(), expected.detach(), **tolerances(expected),
                               msg=lambda m: f"{what}: {m}")


def _outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def check_op(op, reference, inputs, differentiable, seed: int = 0) -> None:
    """op(*neuron inputs) against reference(*cpu inputs): every output, and the gradient of every
    input whose position is in `differentiable`, from random upstream gradients."""
    gen = torch.Generator().manual_seed(seed)
    cpu = [t.clone().requires_grad_(i in differentiable) if isinstance(t, torch.Tensor) else t
           for i, t in enumerate(inputs)]
    dev = [t.to("neuron").requires_grad_(i in differentiable) if isinstance(t, torch.Tensor)
           else t for i, t in enumerate(inputs)]
    expected, actual = _outputs(reference(*cpu)), _outputs(op(*dev))
    assert len(expected) == len(actual)
    grads = [torch.randn(e.shape, generator=gen).to(e.dtype) for e in expected]
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype and a.shape == e.shape, f"output {i}: {a.dtype} {a.shape} vs " \
                                                          f"{e.dtype} {e.shape}"
        assert_close(a, e, f"output {i}")
    if not differentiable:
        return
    torch.autograd.backward(expected, grads)
    torch.autograd.backward(actual, [g.to("neuron") for g in grads])
    for i in differentiable:
        assert dev[i].grad is not None, f"input {i} got no gradient"
        assert_close(dev[i].grad, cpu[i].grad, f"gradient of input {i}")
