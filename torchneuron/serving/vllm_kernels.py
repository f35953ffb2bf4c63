"""vLLM CPU's kernels that the plugin calls itself on neuron tensors, in one place. vLLM's
compiled extension (`vllm._C`, loaded with `vllm._custom_ops`) registers them in the op
namespace `torch.ops._C`, which is vLLM's, not a PyTorch internal; torchneuron's boxed fallback
runs them on CPU aliases of the neuron tensors.

29 of vLLM CPU's `_C` ops (its attention and KV-cache ops among them) are catch-all kernels, which
the dispatcher runs directly on neuron tensors ahead of the fallback; they are guarded here, where
`vllm._C` is loaded, so that they wait for queued device work (asynchronous execution) before they
read device memory through its data pointers (torchneuron/runtime/execution.py)."""

from __future__ import annotations

import torch
import vllm._custom_ops  # noqa: F401  (loads vllm._C, which registers the kernels)

from ..runtime import execution

GUARDED = execution.guard_host_kernels("_C")

# The greedy token of each row of float32 logits (vLLM CPU's sampler).
greedy_argmax = torch.ops._C.greedy_argmax
# out = x @ packed weight (+ bias), on a weight oneDNN packed once (vLLM CPU's linear layers).
onednn_mm = torch.ops._C.onednn_mm
# out = RMS norm of x times weight; and its in-place form on x + residual (vLLM's RMSNorm in
# eager mode, ir_kernels.py).
rms_norm = torch.ops._C.rms_norm
fused_add_rms_norm = torch.ops._C.fused_add_rms_norm
