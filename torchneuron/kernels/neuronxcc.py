"""`neuronxcc` where AWS's compiler package is not installed: its `nki` is torchneuron's NKI
(torchneuron/import_names.py binds `neuronxcc.nki`, `.language`, `.isa` and `.typing`). The legacy
index API of neuronxcc.nki (nl.mgrid, nl.arange, mask=) stays refused with a clear error."""

from . import nki  # noqa: F401
