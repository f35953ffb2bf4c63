"""vLLM's linear layers on neuron run vLLM CPU's oneDNN matmul on a prepacked copy of the weight.

vLLM picks a linear layer's matmul by platform: the CPU packs each weight once into oneDNN's
blocked layout (`create_onednn_mm`, in `dispatch_cpu_unquantized_gemm`) and runs `onednn_mm`
on it every step; any other platform gets `F.linear`, which on the software NeuronCore is MKL's
sgemm on the plain weight, repacking it inside every call (15% slower than oneDNN at prefill
sizes on this host, and a different summation order from vLLM CPU's). Here a neuron layer keeps
its weight in neuron memory, as the platform promises, and also holds oneDNN's packed copy of
it (host memory of oneDNN's own, as on vLLM CPU, which drops the plain weight instead), made
from a host copy of the weight at the layer's first call; the matmul then runs `vllm._C.onednn_mm`
on the neuron activations through torchneuron's boxed fallback, as vLLM's other CPU kernels do.
The same kernel on the same packed weight gives vLLM CPU's outputs bit for bit.

The packed copy follows the weight. It is made again when the layer is called with another
weight tensor, when the weight's storage moved (`weight.data = ...`) or it was written in place
(its version counter moved), and after vLLM (re)processes loaded weights, since vLLM's weight
loaders write through `param.data`, which no version counter sees. Weights oneDNN refuses
(vLLM CPU then takes `F.linear` too), weights that are not 2-D neuron tensors, inference tensors
(no version counter to follow), calls inside torch.compile (which traces `F.linear`, as
before) and calls captured into a decode graph (decode_graphs.py, which cannot hold
`onednn_mm`) keep vLLM's `F.linear`.
"""

from __future__ import annotations

import torch
from vllm import _custom_ops as ops
from vllm.model_executor.layers import utils as vllm_layer_utils
from vllm.model_executor.layers.linear import UnquantizedLinearMethod
from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod
from vllm.platforms import CpuArchEnum, current_platform

from .decode_graphs import capturing
from .vllm_kernels import onednn_mm

# vLLM CPU's size for a layer's cache of oneDNN primitives (one per batch size seen).
PRIMITIVE_CACHE_SIZE = 32
# Where a layer keeps its PackedWeight (vLLM CPU keeps its matmul in `layer.cpu_linear`).
ATTRIBUTE = "neuron_packed_weight"

_vllm_default_gemm = vllm_layer_utils.default_unquantized_gemm


class PackedWeight:
    """oneDNN's packed copy of one weight (`handler`; None where the weight is not packed),
    and what the weight was when it was packed."""

    __slots__ = ("source", "plain", "version", "data_ptr", "handler", "device", "dtype")

    def __init__(self, weight: torch.Tensor) -> None:
        self.source = weight
        # A plain tensor over the weight that shares its version counter: vLLM's parameters
        # route every attribute read through a Python __torch_function__ (~2-5 us each), and
        # this is read on every call.
        self.plain = weight.detach()
        # internal: see runtime/torch_internals.py "torch.Tensor._version"
        self.version = self.plain._version if not self.plain.is_inference() else None
        self.data_ptr = self.plain.data_ptr()
        self.handler = pack(self.plain) if self.version is not None else None
        self.device, self.dtype = self.plain.device, self.plain.dtype

    def is_current(self, weight: torch.Tensor) -> bool:
        if weight is not self.source or self.version is None:
            return weight is self.source
        # internal: see runtime/torch_internals.py "torch.Tensor._version"
        return self.plain._version == self.version and weight.data_ptr() == self.data_ptr


def pack(weight: torch.Tensor):
    """oneDNN's handler over a packed copy of a 2-D neuron weight ([N, K]), or None where the
    weight is not one or oneDNN refuses it. The handler copies the weight into memory of its
    own, so the host copy it is made from is dropped at once."""
    if weight.device.type != "neuron" or weight.ndim != 2:
        return None
    try:
        return ops.create_onednn_mm(weight.cpu().t(), PRIMITIVE_CACHE_SIZE)
    except RuntimeError:  # as vLLM CPU: oneDNN refuses the dtype or the shape
        return None


def packed_weight(layer: torch.nn.Module, weight: torch.Tensor) -> PackedWeight:
    """The layer's packed copy of `weight`, packed again if the weight changed."""
    packed = layer.__dict__.get(ATTRIBUTE)
    if packed is None or not packed.is_current(weight):
        packed = layer.__dict__[ATTRIBUTE] = PackedWeight(weight)
    return packed


def packed_linear(layer: torch.nn.Module, x: torch.Tensor, weight: torch.Tensor,
                  bias: torch.Tensor | None = None) -> torch.Tensor:
    """vLLM's unquantized gemm: oneDNN on the packed copy of a neuron weight, else vLLM's."""
    if torch.compiler.is_compiling() or capturing():
        return _vllm_default_gemm(layer, x, weight, bias)
    packed = packed_weight(layer, weight)
    handler = packed.handler
    # An input on another device or of another dtype gets F.linear's error, as elsewhere
    # (oneDNN would compute a CPU input from the packed copy, or convert the dtype).
    if handler is None or x.device != packed.device or x.dtype != packed.dtype:
        return _vllm_default_gemm(layer, x, weight, bias)
    out = x.new_empty((*x.shape[:-1], handler.n))
    onednn_mm(out, x if x.dim() == 2 else x.reshape(-1, handler.k), bias, handler.handler_tensor)
    return out


def _forget_packed_after(process_weights_after_loading):
    def process_then_forget(self, layer: torch.nn.Module) -> None:
        process_weights_after_loading(self, layer)
        layer.__dict__.pop(ATTRIBUTE, None)
    process_then_forget.wrapped = process_weights_after_loading
    return process_then_forget


def install() -> None:
    # vLLM CPU's rule for taking oneDNN (built with it, not on POWER).
    if not ops._supports_onednn or current_platform.get_cpu_architecture() == CpuArchEnum.POWERPC:
        return
    # vLLM hands every platform that is neither the CPU, CUDA nor ROCm this module attribute,
    # looked up when a linear method is built (UnquantizedLinearMethod) or called (the LM
    # head's UnquantizedEmbeddingMethod). What is not a neuron weight still gets vLLM's.
    if vllm_layer_utils.default_unquantized_gemm is _vllm_default_gemm:
        vllm_layer_utils.default_unquantized_gemm = packed_linear
    for method in (UnquantizedLinearMethod, UnquantizedEmbeddingMethod):
        if not hasattr(method.process_weights_after_loading, "wrapped"):
            method.process_weights_after_loading = _forget_packed_after(
                method.process_weights_after_loading)
