"""Dynamo on neuron behaves as on the CPU: dynamic shapes, automatic dynamic, graph breaks that
run the rest in neuron eager, guards and recompilation, and the compile modes."""

import warnings

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend


def norm_and_scale(x, w):
    return torch.nn.functional.layer_norm(x, x.shape[-1:]) * w + x.mean(0)


def frames_compiled(device, calls, backend, **compile_kwargs):
    """Runs fn(*args) for each (args) in `calls`, moved to `device`, under a counting backend;
    returns (graph count, outputs)."""
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    fn = torch.compile(norm_and_scale, backend=counter, **compile_kwargs)
    outs = [fn(*(a.to(device) for a in args)) for args in calls]
    return counter.frame_count, outs


def shapes(*rows):
    return [(torch.randn(n, 8), torch.randn(8)) for n in rows]


def check_like_cpu(calls, **compile_kwargs):
    """Same graph count as Inductor on the CPU, same results as the CPU's compiled code (the
    same generated kernels) and, in float32, as eager."""
    count, outs = frames_compiled("neuron", calls, "neuron", **compile_kwargs)
    cpu_count, cpu_outs = frames_compiled("cpu", calls, "inductor", **compile_kwargs)
    assert count == cpu_count
    for out, cpu_out, args in zip(outs, cpu_outs, calls):
        assert out.device.type == "neuron"
        torch.testing.assert_close(out.cpu(), cpu_out)
        if out.dtype == torch.float32:
            torch.testing.assert_close(out.cpu(), norm_and_scale(*[a.detach() for a in args]))
    return count


def test_dynamic_true_compiles_once_for_every_shape():
    assert check_like_cpu(shapes(4, 7, 33), dynamic=True) == 1


def test_automatic_dynamic_recompiles_once_on_the_second_shape():
    # static for the first shape, one dynamic graph from the second shape on
    assert check_like_cpu(shapes(4, 7, 33, 12)) == 2


def test_guards_recompile_on_dtype_and_requires_grad_as_on_cpu():
    calls = [(torch.randn(4, 8), torch.randn(8)),
             (torch.randn(4, 8).bfloat16(), torch.randn(8).bfloat16()),
             (torch.randn(4, 8), torch.randn(8).requires_grad_())]
    assert check_like_cpu(calls, dynamic=False) == 3


def with_graph_break(x):
    y = x.relu() * 2
    if y.sum().item() > 0:  # data-dependent Python branch: Dynamo breaks the graph here
        y = y + 1
    return y.softmax(-1)


def test_graph_break_runs_the_rest_in_neuron_eager():
    x = torch.randn(8, 8, device="neuron")
    explanation = torch._dynamo.explain(with_graph_break)(x)
    assert explanation.graph_break_count >= 1 and explanation.graph_count >= 2
    torch._dynamo.reset()
    out = torch.compile(with_graph_break, backend="neuron")(x)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), with_graph_break(x.cpu()))


def test_fullgraph_reports_the_break():
    x = torch.randn(8, 8, device="neuron")
    with pytest.raises((torch._dynamo.exc.Unsupported, torch._dynamo.exc.UserError),
                       match="data-dependent"):
        torch.compile(with_graph_break, backend="neuron", fullgraph=True)(x)


@pytest.mark.parametrize("mode,reason", [("max-autotune", "GEMM templates")])
def test_modes_fall_back_with_one_warning(mode, reason):
    from torchneuron.compile import backend

    backend._warned_modes.discard(mode)
    x, w = torch.randn(4, 8, device="neuron"), torch.randn(8, device="neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn = torch.compile(norm_and_scale, backend="neuron", mode=mode)
        out = fn(x, w)
        fn(torch.randn(6, 8, device="neuron"), w)  # a recompile warns no more
    ours = [w for w in caught if "on neuron" in str(w.message)]
    assert len(ours) == 1 and reason in str(ours[0].message)
    torch.testing.assert_close(out.cpu(), norm_and_scale(x.cpu(), w.cpu()))


def test_bare_inductor_modes_run_as_on_cpu():
    x, w = torch.randn(4, 8, device="neuron"), torch.randn(8, device="neuron")
    out = torch.compile(norm_and_scale, mode="reduce-overhead")(x, w)
    torch.testing.assert_close(out.cpu(), norm_and_scale(x.cpu(), w.cpu()))


def test_unknown_mode_and_option_are_named():
    x = torch.randn(4, 8, device="neuron")
    with pytest.raises(Exception, match="unknown mode 'fastest'"):
        torch.compile(norm_and_scale, backend="neuron", mode="fastest")(x, x[0])
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown option 'no_such_knob'"):
        torch.compile(norm_and_scale, backend="neuron", options={"no_such_knob": 1})(x, x[0])
