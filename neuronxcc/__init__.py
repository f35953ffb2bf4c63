"""`import neuronxcc`: AWS's Neuron compiler package where it is installed, else the legacy import
name of NKI on torchneuron's software NeuronCore (torchneuron/import_names.py decides)."""

from torchneuron.import_names import bind as _bind

_bind(__name__, __file__)
