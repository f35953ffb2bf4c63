"""The kernel library: the common operations of modern models written as NKI kernels, each a
PyTorch op with forward and backward (a fast composite path, or the NKI kernels on the simulator
under NEURON_KERNEL_MODE=simulate), a plain PyTorch reference, and `apply(model)`."""

from .rms_norm import rms_norm, rms_norm_reference  # noqa: F401
from .rope import rope, rope_reference  # noqa: F401
from .swiglu import swiglu_mlp, swiglu_mlp_reference  # noqa: F401
from .attention import attention, attention_reference  # noqa: F401
from .cross_entropy import cross_entropy, cross_entropy_reference  # noqa: F401
from .router import router_topk, router_topk_reference  # noqa: F401
from .apply import apply  # noqa: F401
from .estimate import KernelEstimate, estimate  # noqa: F401
