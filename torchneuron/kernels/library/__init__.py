"""The kernel library: the common operations of modern models written as NKI kernels, each a
PyTorch op with forward and backward (a fast composite path, or the NKI kernels on the simulator
under NEURON_KERNEL_MODE=simulate) and a plain PyTorch reference; `apply(model)` puts them into
Hugging Face models and `estimate(kernel, ...)` gives a kernel's Trainium time per engine.
docs/kernels.md describes them."""

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
