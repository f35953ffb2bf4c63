"""Helpers of the compile tests: compare a compiled training step with eager neuron and CPU."""

import copy

import torch


def same_model_on(model, device):
    """A copy of `model` with the same weights on `device`."""
    return copy.deepcopy(model).to(device)


def grads(model):
    return {n: p.grad.cpu() for n, p in model.named_parameters() if p.grad is not None}


def compare_training_step(model, x, backend="neuron", **compile_kwargs):
    """One forward+backward of `model` compiled on neuron against eager neuron and eager CPU:
    outputs and every parameter's gradient must agree."""
    torch.manual_seed(0)
    eager = same_model_on(model, "neuron")
    compiled_model = same_model_on(model, "neuron")
    cpu = same_model_on(model, "cpu")
    compiled = torch.compile(compiled_model, backend=backend, **compile_kwargs)

    out_compiled = compiled(x.to("neuron"))
    out_eager = eager(x.to("neuron"))
    out_cpu = cpu(x)
    assert out_compiled.device.type == "neuron"
    torch.testing.assert_close(out_compiled, out_eager)
    torch.testing.assert_close(out_compiled.cpu(), out_cpu)

    out_compiled.square().mean().backward()
    out_eager.square().mean().backward()
    out_cpu.square().mean().backward()
    g_compiled, g_eager, g_cpu = grads(compiled_model), grads(eager), grads(cpu)
    assert g_compiled.keys() == g_eager.keys() == g_cpu.keys() and g_compiled
    for name in g_eager:
        torch.testing.assert_close(g_compiled[name], g_eager[name], msg=name)
        torch.testing.assert_close(g_compiled[name], g_cpu[name], msg=name)
    return compiled
