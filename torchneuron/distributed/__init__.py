"""torch.distributed on neuron: the c10d backend `neuron`, built on gloo, zero-copy on neuron
memory. `register()` runs once at import of torchneuron (step 7 of torchneuron/__init__.py)."""

from .backend import BACKEND_NAME, register

__all__ = ["BACKEND_NAME", "register"]
