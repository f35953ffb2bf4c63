"""The kernel library: the common operations of modern models written as NKI kernels, each a
PyTorch op with forward and backward (a fast composite path, or the NKI kernels on the simulator
under NEURON_KERNEL_MODE=simulate) and a plain PyTorch reference; `apply(model)` puts them into
Hugging Face models and `estimate(kernel, ...)` gives a kernel's Trainium time per engine.
docs/kernels.md describes them.

- `rms_norm.py`: RMSNorm with Hugging Face Llama's rounding, rstd kept for the backward.
- `rope.py`: rotary position embedding in Hugging Face's rotate-half layout.
- `swiglu.py`: the SwiGLU MLP of Llama-family models.
- `attention.py`: flash-style attention with grouped-query heads, causal or not.
- `cross_entropy.py`: cross-entropy over a large vocabulary without the full logits.
- `router.py`: mixture-of-experts top-k routing as Mixtral's router computes it.
- `matmul.py`: the tiled Tensor Engine matrix products the kernels share.
- `online_softmax.py`: the online softmax step attention and cross-entropy share.
- `checks.py`: the argument checks every library op makes before it runs.
- `mode.py`: which implementation the ops run (NEURON_KERNEL_MODE: fast or simulate).
- `apply.py`: `apply(model)`, the library's ops inside a Hugging Face model.
- `estimate.py`: `estimate(kernel, ...)`, a kernel's Trainium time per engine from its
  instructions."""

from .apply import apply
from .attention import attention, attention_reference
from .cross_entropy import cross_entropy, cross_entropy_reference
from .estimate import KernelEstimate, estimate
from .rms_norm import rms_norm, rms_norm_reference
from .rope import rope, rope_reference
from .router import router_topk, router_topk_reference
from .swiglu import swiglu_mlp, swiglu_mlp_reference

__all__ = ["apply", "attention", "attention_reference", "cross_entropy", "cross_entropy_reference",
           "KernelEstimate", "estimate", "rms_norm", "rms_norm_reference", "rope", "rope_reference",
           "router_topk", "router_topk_reference", "swiglu_mlp", "swiglu_mlp_reference"]
