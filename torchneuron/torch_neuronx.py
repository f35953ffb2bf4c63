"""TorchNeuron's API under AWS's import name `torch_neuronx` (what `import torch_neuronx` gives
where AWS's torch-neuronx is not installed; see torchneuron/import_names.py)."""

from .kernels.nki_op import nki_op  # noqa: F401
