"""NKI on the software NeuronCore: `nki.jit`, `nki.language` and `nki.isa`, written from AWS's
public NKI documentation (NKI 0.7, Neuron SDK 2.33) and run by an interpreter over CPU views of
device memory. Imported as `nki` where AWS's real package is not installed (see
torchneuron/import_names.py)."""

from . import collectives, isa, language, typing  # noqa: F401
from .dtypes import NkiDtype as dtype  # noqa: F401  (annotations: `compute_dtype: nki.dtype`)
from .errors import NkiError, NkiUnsupportedError, NkiValidationError  # noqa: F401
from .jit import Kernel, jit, simulate  # noqa: F401

__version__ = "0.7.0+torchneuron"
