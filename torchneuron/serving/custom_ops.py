"""vLLM's custom ops (rotary embedding, norms, activations) on neuron take their CPU kernels.

vLLM dispatches a custom op by platform: the CPU gets `forward_cpu` (the `vllm._C` kernels,
e.g. one in-place `rotary_embedding` call), an out-of-tree platform gets `forward_oot`, which
defaults to `forward_native`, a chain of PyTorch ops (the rotary embedding alone is ~15 ops per
layer and step). On the software NeuronCore the CPU kernels are the right ones: torchneuron's
boxed fallback runs them on CPU aliases of the neuron tensors, exactly as it runs vLLM's CPU
attention kernels. An op that defines its own `forward_oot` keeps it. While a decode graph is
captured (decode_graphs.py), which cannot hold the `_C` kernels, the PyTorch-native form is
taken.
"""

from __future__ import annotations

from vllm.model_executor.custom_op import CustomOp

from .decode_graphs import capturing

_vllm_forward_oot = CustomOp.forward_oot


def _forward_oot(self, *args, **kwargs):
    if capturing():
        return self.forward_native(*args, **kwargs)
    return self.forward_cpu(*args, **kwargs)


def install() -> None:
    # Only the base class's default is replaced, so the change reaches nothing but
    # out-of-tree dispatch (neuron, in a process whose platform is neuron).
    if CustomOp.forward_oot is _vllm_forward_oot:
        CustomOp.forward_oot = _forward_oot
