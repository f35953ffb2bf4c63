"""nki.typing (also neuronxcc.nki.typing): the names kernels annotate their parameters with.
Annotations do not change how a kernel runs; these are the types the arguments have inside it."""

from .tensor import NkiTensor

tensor = NkiTensor  # a tensor argument (HBM)
mutable_tensor = NkiTensor  # a tensor argument the kernel writes
scalar = int | float  # a compile-time scalar argument

__all__ = ["tensor", "mutable_tensor", "scalar"]
