"""`import nki`: AWS's NKI where it is installed, else NKI on torchneuron's software NeuronCore
(torchneuron/import_names.py decides)."""

from torchneuron.import_names import bind as _bind

_bind(__name__, __file__)
