"""Convolution layouts on neuron: the kernel answers in the CPU's memory format, tracing predicts
that format (compile/conv_layout.py), and a compiled CNN that plans channels-last layouts runs
and matches the CPU."""

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

from compile_models import CNN, cnn_input

# (input shape, weight shape, padding): a 3x3, a 1x1 on a single image (where the CPU's choice
# of kernel depends on the thread count) and a wider 3x3.
CASES = [((4, 3, 16, 16), (8, 3, 3, 3), 1), ((1, 8, 8, 8), (4, 8, 1, 1), 0),
         ((2, 8, 12, 12), (16, 8, 3, 3), 1)]
LAYOUTS = {"contiguous": (torch.contiguous_format, torch.contiguous_format),
           "channels_last_input": (torch.channels_last, torch.contiguous_format),
           "channels_last_weight": (torch.contiguous_format, torch.channels_last),
           "channels_last": (torch.channels_last, torch.channels_last)}


@pytest.fixture(params=[1, 2], ids=lambda n: f"{n}threads")
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def layout_of(t):
    """Shape and the strides that matter (a dimension of size 1 may have any stride)."""
    return t.shape, tuple(s for s, n in zip(t.stride(), t.shape) if n > 1)


def conv_inputs(case, layout):
    shape, wshape, padding = case
    x_format, w_format = LAYOUTS[layout]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g).to(memory_format=x_format)
    w = torch.randn(wshape, generator=g).to(memory_format=w_format)
    b = torch.randn(wshape[0], generator=g)
    return x, w, b, padding


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])))
def test_forward_and_backward_answer_in_the_cpus_layout(case, layout, threads):
    x, w, b, padding = conv_inputs(case, layout)
    results = {}
    for device in ("cpu", "neuron"):
        xd, wd, bd = (t.detach().to(device).requires_grad_() for t in (x, w, b))
        out = F.conv2d(xd, wd, bd, padding=padding)
        grad = torch.ones_like(out).to(memory_format=torch.channels_last) \
            if layout != "contiguous" else torch.ones_like(out)
        out.backward(grad)
        results[device] = (out, xd.grad, wd.grad, bd.grad)
    for name, c, n in zip(("output", "grad_input", "grad_weight", "grad_bias"),
                          results["cpu"], results["neuron"]):
        assert n.device.type == "neuron"
        assert layout_of(n) == layout_of(c), name
        torch.testing.assert_close(n.cpu(), c, msg=name)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[0])))
def test_tracing_predicts_the_layout_the_kernel_answers_in(case, layout, threads):
    x, w, b, padding = conv_inputs(case, layout)
    xn, wn, bn = x.neuron(), w.neuron(), b.neuron()
    real = torch.ops.aten.convolution(xn, wn, bn, [1, 1], [padding] * 2, [1, 1], False, [0, 0], 1)
    grads = torch.ops.aten.convolution_backward(
        torch.ones_like(real), xn, wn, [wn.shape[0]], [1, 1], [padding] * 2, [1, 1], False,
        [0, 0], 1, [True, True, True])
    mode = FakeTensorMode()
    fx, fw, fb = (mode.from_tensor(t) for t in (xn, wn, bn))
    with mode:
        fake = torch.ops.aten.convolution(fx, fw, fb, [1, 1], [padding] * 2, [1, 1], False,
                                          [0, 0], 1)
        fake_grads = torch.ops.aten.convolution_backward(
            torch.ones_like(fake), fx, fw, [fw.shape[0]], [1, 1], [padding] * 2, [1, 1], False,
            [0, 0], 1, [True, True, True])
    assert fake.device == real.device
    assert layout_of(fake) == layout_of(real)
    for name, f, r in zip(("grad_input", "grad_weight", "grad_bias"), fake_grads, grads):
        assert f.device == r.device, name
        assert layout_of(f) == layout_of(r), name


def test_traced_convolution_keeps_the_cpu_rules_errors():
    mode = FakeTensorMode()
    x = mode.from_tensor(torch.randn(1, 3, 8, 8).neuron())
    w = mode.from_tensor(torch.randn(4, 3, 3, 3, dtype=torch.bfloat16).neuron())
    with mode, pytest.raises(RuntimeError, match=r"Input type \(torch.float32\) and weight "
                                                 r"type \(torch.bfloat16\) should be the same"):
        torch.ops.aten.convolution(x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_compiled_cnn_with_channels_last_layout_planned(train, threads):
    # Inductor's layout optimization turns every convolution channels-last; before neuron's
    # layout was predicted as the CPU's, the plan disagreed with the kernel and the compiled
    # graph failed its stride check.
    torch.manual_seed(0)
    model, x = CNN().train(train), cnn_input()
    on_neuron = CNN().train(train).neuron()
    on_neuron.load_state_dict(model.state_dict())
    compiled = torch.compile(on_neuron, options={"force_layout_optimization": True})
    with torch.set_grad_enabled(train):
        out = compiled(x.neuron())
        expected = model(x)
    torch.testing.assert_close(out.cpu(), expected)
    if train:
        out.square().mean().backward()
        expected.square().mean().backward()
        for (name, p), q in zip(on_neuron.named_parameters(), model.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, msg=name)
