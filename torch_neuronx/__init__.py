"""`import torch_neuronx`: AWS's torch-neuronx where it is installed, else torchneuron's API
under that name (torchneuron/import_names.py decides)."""

from torchneuron.import_names import bind as _bind

_bind(__name__, __file__)
