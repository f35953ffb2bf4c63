"""The eager fast path (NEURON_KERNEL_MODE=fast outside torch.compile): each public op runs
without its custom operator (whose dispatch costs more than the op at model sizes), as the
composite or as an autograd.Function with the hand-written backward, and equals the reference
on the CPU, forward and gradients; the custom operators themselves, which compiled graphs run
in fast mode, equal it too."""

import importlib

import pytest
import torch

from torchneuron.kernels import library as kl

from .compare import check_op

modules = {name: importlib.import_module(f"torchneuron.kernels.library.{name}")
           for name in ("rms_norm", "rope", "swiglu", "attention", "cross_entropy", "router")}
OPS = {"rms_norm": "rms_norm_op", "rope": "rope_op", "swiglu": "swiglu_mlp_op",
       "attention": "attention_op", "cross_entropy": "cross_entropy_op",
       "router": "router_topk_op"}


def _inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(dtype)
    angles = torch.randn(2, 9, 4, generator=g).repeat(1, 1, 2)
    target = torch.randint(0, 300, (20,), generator=g)
    target[::5] = -100
    return {
        "rms_norm": ([randn(3, 7, 40), 1 + randn(40, scale=0.1)], kl.rms_norm,
                     kl.rms_norm_reference, (0, 1)),
        "rope": ([randn(2, 4, 9, 8), randn(2, 2, 9, 8), angles.cos().to(dtype),
                  angles.sin().to(dtype)], kl.rope, kl.rope_reference, (0, 1)),
        "swiglu": ([randn(2, 9, 24), randn(40, 24, scale=0.2), randn(40, 24, scale=0.2),
                    randn(24, 40, scale=0.2)], kl.swiglu_mlp, kl.swiglu_mlp_reference,
                   (0, 1, 2, 3)),
        "attention": ([randn(2, 4, 9, 8), randn(2, 2, 9, 8), randn(2, 2, 9, 8)], kl.attention,
                      kl.attention_reference, (0, 1, 2)),
        "cross_entropy": ([randn(20, 300), target], kl.cross_entropy,
                          kl.cross_entropy_reference, (0,)),
        "cross_entropy hidden": ([randn(20, 16), target, randn(300, 16, scale=0.2)],
                                 kl.cross_entropy, kl.cross_entropy_reference, (0, 2)),
        "router": ([randn(20, 16), randn(6, 16), 2], lambda x, w, k: kl.router_topk(x, w, k)[:2],
                   lambda x, w, k: kl.router_topk_reference(x, w, k)[:2], (0, 1)),
    }


@pytest.fixture
def no_custom_ops(monkeypatch):
    """Every library custom operator raises if called."""
    def refuse(name):
        def op(*args, **kwargs):
            raise AssertionError(f"the eager fast path called {name}")
        return op
    for module_name, op_name in OPS.items():
        monkeypatch.setattr(modules[module_name], op_name, refuse(op_name))


@pytest.fixture(params=["composite", "function"])
def eager_path(request, monkeypatch):
    """Below the size thresholds the composite runs; with them at 0 the hand-written
    autograd.Functions run even at these small shapes."""
    if request.param == "function":
        monkeypatch.setattr(modules["rms_norm"], "FUNCTION_MIN_ELEMENTS", 0)
        monkeypatch.setattr(modules["cross_entropy"], "HIDDEN_FUNCTION_MIN_LOGITS", 0)
        monkeypatch.setattr(modules["cross_entropy"], "CHUNK", 100)  # blocks of 6 rows
    return request.param


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("case", sorted(_inputs()))
def test_eager_ops_skip_the_custom_operator_and_match(no_custom_ops, eager_path, case, dtype):
    inputs, op, reference, differentiable = _inputs(dtype)[case]
    check_op(op, reference, inputs, differentiable)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_eager_hidden_cross_entropy_without_gradients(monkeypatch, reduction):
    """No grad mode, or only one input asking for a gradient: the forward computes only what
    the backward will use, and the loss is the same."""
    monkeypatch.setattr(modules["cross_entropy"], "HIDDEN_FUNCTION_MIN_LOGITS", 0)
    monkeypatch.setattr(modules["cross_entropy"], "CHUNK", 100)
    inputs, *_ = _inputs()["cross_entropy hidden"]
    x, target, w = inputs
    expected = kl.cross_entropy_reference(x, target, w, reduction=reduction)
    dev = [t.to("neuron") for t in inputs]
    with torch.no_grad():
        torch.testing.assert_close(kl.cross_entropy(*dev, reduction=reduction).cpu(), expected)
    w_grad = dev[2].requires_grad_()
    kl.cross_entropy(*dev, reduction=reduction).backward()
    wr = w.clone().requires_grad_()
    kl.cross_entropy_reference(x, target, wr, reduction=reduction).backward()
    torch.testing.assert_close(w_grad.grad.cpu(), wr.grad)
    assert dev[0].grad is None


def test_eager_hidden_cross_entropy_per_row_losses_take_the_op(monkeypatch):
    """reduction='none' gives each row its own upstream gradient, which the forward cannot
    know: the op (chunks that recompute the logits) runs."""
    monkeypatch.setattr(modules["cross_entropy"], "HIDDEN_FUNCTION_MIN_LOGITS", 0)
    calls = []
    op = modules["cross_entropy"].cross_entropy_op
    monkeypatch.setattr(modules["cross_entropy"], "cross_entropy_op",
                        lambda *a: calls.append(1) or op(*a))
    inputs, *_ = _inputs()["cross_entropy hidden"]
    check_op(lambda x, t, w: kl.cross_entropy(x, t, w, reduction="none"),
             lambda x, t, w: kl.cross_entropy_reference(x, t, w, reduction="none"), inputs,
             differentiable=(0, 2))
    assert calls == [1]


def _through_the_op(case):
    """The op as compiled graphs call it (its fast composite in fast mode)."""
    m = modules
    return {
        "rms_norm": lambda x, w: m["rms_norm"].rms_norm_op(x, w, 1e-6)[0],
        "rope": lambda q, k, c, s: m["rope"].rope_op(q, k, c, s, False),
        "swiglu": lambda *a: m["swiglu"].swiglu_mlp_op(*a)[0],
        "attention": lambda q, k, v: m["attention"].attention_op(q, k, v, 8 ** -0.5, True)[0],
        "cross_entropy": lambda x, t: m["cross_entropy"].cross_entropy_op(
            x, t, x.new_empty(0), -100, "mean")[0],
        "cross_entropy hidden": lambda x, t, w: m["cross_entropy"].cross_entropy_op(
            x, t, w, -100, "mean")[0],
        "router": lambda x, w, k: m["router"].router_topk_op(x, w, k)[:2],
    }[case]


@pytest.mark.parametrize("case", sorted(_inputs()))
def test_the_custom_operators_in_fast_mode_match(case):
    inputs, _, reference, differentiable = _inputs()[case]
    check_op(_through_the_op(case), reference, inputs, differentiable)
