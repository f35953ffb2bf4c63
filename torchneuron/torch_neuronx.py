"""TorchNeuron's API under AWS's import name `torch_neuronx` (what `import torch_neuronx` gives
where AWS's torch-neuronx is not installed; see torchneuron/import_names.py).

Libraries find the device `neuron` by this name (transformers' `is_torch_neuron_available`,
accelerate's `is_neuron_available`): importing it registers the device, as AWS's package does,
also under TORCH_DEVICE_BACKEND_AUTOLOAD=0. It exposes the device module's functions
(`torch_neuronx.device_count()` is `torch.neuron.device_count()`), the version, and `nki_op`."""

import torchneuron as _torchneuron  # registers the device (a no-op where autoload already did)
from torchneuron.device import *  # noqa: F401,F403  (torch.neuron's names)
from torchneuron.device import __all__ as _device_names

from .kernels.nki_op import nki_op  # noqa: F401

__version__ = _torchneuron.__version__
__all__ = [*_device_names, "nki_op", "__version__"]
