"""vLLM's linear layers on neuron (torchneuron/serving/packed_linear.py): oneDNN on a packed copy
of the neuron weight gives vLLM CPU's outputs bit for bit, the copy follows the weight (in-place
writes, storage swaps, another weight, vLLM's reloads), and what cannot be packed keeps
`F.linear` with its results and its errors. No engine: the layers are called directly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("vllm")

from vllm import _custom_ops as ops  # noqa: E402
from vllm.model_executor.layers import utils as vllm_layer_utils  # noqa: E402
from vllm.model_executor.layers.linear import UnquantizedLinearMethod  # noqa: E402
from vllm.model_executor.layers.vocab_parallel_embedding import (  # noqa: E402
    UnquantizedEmbeddingMethod)

from torchneuron.serving import packed_linear  # noqa: E402
from torchneuron.serving.packed_linear import ATTRIBUTE  # noqa: E402

BIT_FOR_BIT = dict(rtol=0, atol=0)


@pytest.fixture(autouse=True)
def installed():
    packed_linear.install()


def neuron_layer(out_features: int = 48, in_features: int = 32, bias: bool = False, seed=0):
    generator = torch.Generator().manual_seed(seed)
    layer = torch.nn.Module()
    weight = torch.randn(out_features, in_features, generator=generator)
    layer.weight = torch.nn.Parameter(weight.to("neuron"), requires_grad=False)
    layer.bias = (torch.nn.Parameter(torch.randn(out_features, generator=generator)
                                     .to("neuron"), requires_grad=False) if bias else None)
    return layer


def linear(layer, x):
    """What vLLM's linear method calls for a layer on this platform."""
    return vllm_layer_utils.default_unquantized_gemm(layer, x, layer.weight, layer.bias)


def vllm_cpu_linear(layer, x):
    """vLLM CPU's own matmul for the same weights: its dispatch on a CPU copy of the layer."""
    cpu = torch.nn.Module()
    cpu.weight = torch.nn.Parameter(layer.weight.cpu(), requires_grad=False)
    cpu.bias = None if layer.bias is None else layer.bias.cpu()
    vllm_layer_utils.dispatch_cpu_unquantized_gemm(cpu, remove_weight=False)
    return cpu.cpu_linear(x.cpu(), cpu.weight, cpu.bias)


def handler_of(layer):
    return layer.__dict__[ATTRIBUTE].handler


@pytest.mark.parametrize("shape", [(1, 32), (7, 32), (130, 32), (3, 5, 32)],
                         ids=["decode", "batch", "prefill", "3-D"])
@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
def test_neuron_linear_gives_vllm_cpus_outputs_bit_for_bit(shape, bias):
    layer = neuron_layer(bias=bias)
    x = torch.randn(shape)
    out = linear(layer, x.to("neuron"))
    assert out.device.type == "neuron" and out.shape == (*shape[:-1], 48)
    assert handler_of(layer) is not None, "the neuron weight was not packed"
    torch.testing.assert_close(out.cpu(), vllm_cpu_linear(layer, x), **BIT_FOR_BIT)
    reference = F.linear(x, layer.weight.cpu(), None if layer.bias is None else layer.bias.cpu())
    torch.testing.assert_close(out.cpu(), reference)


def test_weight_is_packed_once_and_stays_on_neuron():
    layer = neuron_layer()
    x = torch.randn(4, 32, device="neuron")
    linear(layer, x)
    first = handler_of(layer)
    linear(layer, x)
    assert handler_of(layer) is first
    assert layer.weight.device.type == "neuron" and layer.weight.shape == (48, 32)


def refreshed(layer, change) -> None:
    """After `change(layer)`, the next call packs again and computes with the new weight."""
    x = torch.randn(5, 32)
    linear(layer, x.to("neuron"))
    before = handler_of(layer)
    change(layer)
    out = linear(layer, x.to("neuron"))
    assert handler_of(layer) is not before
    torch.testing.assert_close(out.cpu(), vllm_cpu_linear(layer, x), **BIT_FOR_BIT)
    torch.testing.assert_close(out.cpu(), F.linear(x, layer.weight.cpu()))


def test_in_place_write_repacks():
    def write(layer):
        with torch.no_grad():
            layer.weight.mul_(-2)
    refreshed(neuron_layer(), write)


def test_in_place_write_in_inference_mode_repacks():
    def write(layer):
        with torch.inference_mode():
            layer.weight.add_(1)
    refreshed(neuron_layer(), write)


def test_storage_swap_repacks():
    def swap(layer):
        layer.weight.data = torch.randn(48, 32, device="neuron")
    refreshed(neuron_layer(), swap)


def test_another_weight_repacks():
    def replace(layer):
        layer.weight = torch.nn.Parameter(torch.randn(48, 32, device="neuron"),
                                          requires_grad=False)
    refreshed(neuron_layer(), replace)


@pytest.mark.parametrize("method", [UnquantizedLinearMethod, UnquantizedEmbeddingMethod])
def test_vllms_reload_through_param_data_repacks(method):
    # vLLM's weight loaders write through `param.data`, which moves no version counter; vLLM
    # then runs the method's process_weights_after_loading, which drops the packed copy.
    def reload(layer):
        with torch.no_grad():
            layer.weight.data.copy_(torch.randn(48, 32))
        method().process_weights_after_loading(layer)
    refreshed(neuron_layer(), reload)


def test_inference_tensor_weight_keeps_f_linear():
    layer = neuron_layer()
    with torch.inference_mode():
        layer.weight = torch.nn.Parameter(layer.weight.clone(), requires_grad=False)
    assert layer.weight.is_inference()
    x = torch.randn(3, 32)
    out = linear(layer, x.to("neuron"))
    assert handler_of(layer) is None
    torch.testing.assert_close(out.cpu(), F.linear(x, layer.weight.cpu()))


def test_cpu_weight_keeps_vllms_gemm():
    layer = torch.nn.Module()
    layer.weight, layer.bias = torch.nn.Parameter(torch.randn(6, 4)), None
    x = torch.randn(2, 4)
    torch.testing.assert_close(linear(layer, x), F.linear(x, layer.weight))
    assert handler_of(layer) is None


def test_weight_onednn_refuses_keeps_f_linear_and_is_not_retried(monkeypatch):
    calls = []

    def refuse(weight, primitive_cache_size):
        calls.append(weight.shape)
        raise RuntimeError("could not create a primitive descriptor for the matmul primitive")

    monkeypatch.setattr(ops, "create_onednn_mm", refuse)
    layer = neuron_layer()
    x = torch.randn(3, 32)
    for _ in range(2):
        out = linear(layer, x.to("neuron"))
        torch.testing.assert_close(out.cpu(), F.linear(x, layer.weight.cpu()))
    assert calls == [(32, 48)] and handler_of(layer) is None


@pytest.mark.parametrize("x, message", [
    (torch.randn(2, 32), "same device"),
    (torch.randn(2, 32, dtype=torch.bfloat16).to("neuron"), "same dtype"),
], ids=["cpu-input", "bfloat16-input"])
def test_mismatched_input_gets_f_linears_error(x, message):
    layer = neuron_layer()
    with pytest.raises(RuntimeError, match=message):
        F.linear(x, layer.weight)
    with pytest.raises(RuntimeError, match=message):
        linear(layer, x)


def test_torch_compile_traces_f_linear():
    layer = neuron_layer()
    compiled = torch.compile(lambda x: linear(layer, x), backend="eager", fullgraph=True)
    x = torch.randn(4, 32)
    torch.testing.assert_close(compiled(x.to("neuron")).cpu(), F.linear(x, layer.weight.cpu()))
    assert ATTRIBUTE not in layer.__dict__


def test_install_is_idempotent():
    packed_linear.install()
    assert vllm_layer_utils.default_unquantized_gemm is packed_linear.packed_linear
    for method in (UnquantizedLinearMethod, UnquantizedEmbeddingMethod):
        wrapped = method.process_weights_after_loading.wrapped
        assert not hasattr(wrapped, "wrapped"), f"{method.__name__} wrapped twice"
