"""Chains compiled for neuron (compile_chain(device="neuron")) against eager CPU: the same
results, written into the caller's neuron buffers, through the kernels torch.compile on neuron
generates (launched with launch_neuron, the call one queued item)."""

from __future__ import annotations

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from torchneuron.fused_eager import ChainCache, compile_chain

from . import chains


def _expected(chain, inputs):
    """Eager CPU: the chain's results and its inputs after it ran (in-place outputs written)."""
    cpu_inputs = chains.on_device(inputs, "cpu")  # copies, in the inputs' layouts
    return chain.run_eager(cpu_inputs), cpu_inputs


@pytest.mark.parametrize("name", sorted(chains.ALL))
def test_neuron_compiled_chain_equals_eager_cpu(compiled_neuron, name):
    chain, inputs = chains.ALL[name]()
    expected, expected_inputs = _expected(chain, inputs)
    neuron_inputs = chains.on_device(inputs, "neuron")
    got = compiled_neuron[name].run(neuron_inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.device.type == "neuron"
        assert g.dtype == e.dtype and g.stride() == e.stride()
        torch.testing.assert_close(g.cpu(), e)
    for g, e in zip(neuron_inputs, expected_inputs):  # in-place outputs, and untouched inputs
        if isinstance(g, torch.Tensor):
            assert g.stride() == e.stride()
            torch.testing.assert_close(g.cpu(), e)


@pytest.mark.parametrize("name", ["arithmetic", "promoting", "in_place", "strided",
                                  "float16_pointwise", "bfloat16_pointwise"])
def test_neuron_chains_equal_the_cpu_compiled_ones_bitwise(compiled, compiled_neuron, name):
    # The same kernels as on the CPU: neuron's code generation is the CPU's C++ one.
    chain, inputs = chains.ALL[name]()
    neuron_inputs = chains.on_device(inputs, "neuron")
    on_cpu = compiled[name].run(inputs)
    on_neuron = compiled_neuron[name].run(neuron_inputs)
    for n, c in zip(on_neuron + neuron_inputs, on_cpu + inputs):
        assert not isinstance(c, torch.Tensor) or torch.equal(n.cpu(), c)


def test_a_float64_scalar_tensor_scales_float32_as_a_python_number_does(compiled_neuron):
    # The queue hands `x * lr` over with lr as a 0-d float64 neuron tensor: one signature for
    # every lr, and the float32 result is bit for bit eager CPU's `x * lr` with lr a Python
    # number (both round lr to float32 and multiply in float32).
    chain, (x, _) = chains.scaled_by_tensor()
    kernel = compiled_neuron["scaled_by_tensor"]
    xn = x.to("neuron")
    for lr in (0.01, 1e-3 / 3, 0.1 + 1e-12, -2.5e-5):
        lr_tensor = torch.tensor(lr, dtype=torch.float64, device="neuron")
        (got,) = kernel.run([xn, lr_tensor])
        assert got.dtype == torch.float32
        assert torch.equal(got.cpu(), x * lr), lr
        assert torch.equal(got.cpu(), x * torch.tensor(lr, dtype=torch.float64))


def test_results_go_into_the_callers_neuron_buffers(compiled_neuron):
    chain, inputs = chains.promoting()
    buffers = [spec.empty("neuron") for spec in chain.output_specs()]
    pointers = [b.data_ptr() for b in buffers]
    assert compiled_neuron["promoting"](chains.on_device(inputs, "neuron"), buffers) is None
    assert [b.data_ptr() for b in buffers] == pointers
    for b, e in zip(buffers, chain.run_eager(inputs)):
        torch.testing.assert_close(b.cpu(), e)


def test_a_kernel_is_called_again_with_other_tensors_of_the_same_layout(compiled_neuron):
    kernel = compiled_neuron["in_place"]
    for _ in range(3):
        chain, inputs = chains.in_place()
        x, y, _ = inputs
        expected = x * y + 1.0
        neuron_inputs = chains.on_device(inputs, "neuron")
        assert kernel.run(neuron_inputs) == []
        torch.testing.assert_close(neuron_inputs[0].cpu(), expected)


def test_the_neuron_wrapper_launches_on_the_stream_as_one_item():
    chain, inputs = chains.arithmetic()
    kernel, sources = run_and_get_code(compile_chain, chain, None, "neuron")
    source = "\n".join(sources)
    assert "launch_neuron(cpp_fused_" in source and "call = as_one_item(call)" in source, source
    assert ".item()" not in source and "synchronize" not in source, source
    assert kernel.device == "neuron"
    (got,) = kernel.run(chains.on_device(inputs, "neuron"))
    torch.testing.assert_close(got.cpu(), chain.run_eager(inputs)[0])


def test_a_cpu_and_a_neuron_compile_of_one_chain_are_two_entries():
    # Inductor's disk cache keys the examples' device: each compile gets its own code.
    chain, _ = chains.arithmetic()
    _, cpu_sources = run_and_get_code(compile_chain, chain, None, "cpu")
    _, neuron_sources = run_and_get_code(compile_chain, chain, None, "neuron")
    assert "launch_neuron" not in "\n".join(cpu_sources)
    assert "launch_neuron" in "\n".join(neuron_sources)


def test_the_chain_cache_keeps_each_device_apart():
    calls = []

    def compile(chain, threads, device):
        calls.append(device)
        return compile_chain(chain, threads, device)

    chain, inputs = chains.in_place()
    cache = ChainCache(hot=1, compile=compile)
    assert cache.lookup(chain, "neuron") is None
    assert cache.wait(timeout=240)
    assert cache.lookup(chain, "cpu") is None  # the neuron kernel is not the CPU's
    assert cache.wait(timeout=240)
    on_neuron, on_cpu = cache.lookup(chain, "neuron"), cache.lookup(chain, "cpu")
    assert calls == ["neuron", "cpu"]
    assert (on_neuron.device, on_cpu.device) == ("neuron", "cpu")
    assert cache.stats()["ready"] == 2 and cache.stats()["chains_seen"] == 2
    x, y, _ = inputs
    expected = x * y + 1.0
    neuron_inputs = chains.on_device(inputs, "neuron")
    on_neuron(neuron_inputs, [])
    on_cpu(inputs, [])
    torch.testing.assert_close(neuron_inputs[0].cpu(), expected)
    torch.testing.assert_close(x, expected)


@pytest.mark.parametrize("device", ["cuda", "neuron:0", torch.device("neuron"), None])
def test_an_unknown_device_is_refused_by_compile_and_lookup(device):
    chain, _ = chains.arithmetic()
    message = "a chain compiles for device 'cpu' or 'neuron'"
    with pytest.raises(ValueError, match=message):
        compile_chain(chain, device=device)
    cache = ChainCache(hot=1, compile=lambda *args: pytest.fail("compiled"))
    with pytest.raises(ValueError, match=message):
        cache.lookup(chain, device)
    assert cache.stats()["chains_seen"] == 0
