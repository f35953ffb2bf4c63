"""The import names of AWS's Neuron packages, `nki` and `torch_neuronx`, where torchneuron is
installed: the one place that decides what they are.

The top-level packages `nki/` and `torch_neuronx/` of this repository are three-line shims that
call `bind`. Where AWS's real package is installed (its distribution ships the package's
`__init__.py` and is not one of PyPI's placeholder releases of the name), `bind` loads that
package from its own files, so torchneuron never shadows it. Otherwise the name becomes
torchneuron's implementation: `nki` is NKI on the software NeuronCore
(torchneuron.kernels.nki, with `nki.language` and `nki.isa`), `torch_neuronx` is
torchneuron.torch_neuronx (TorchNeuron's API under its import name).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path

# name -> (torchneuron's module, {name.sub: the module it is})
_NKI = "torchneuron.kernels.nki"
_NKI_SUBMODULES = {"language": f"{_NKI}.language", "isa": f"{_NKI}.isa",
                   "isa.constants": f"{_NKI}.isa_enums", "typing": f"{_NKI}.typing",
                   "collectives": f"{_NKI}.collectives", "lnc": f"{_NKI}.lnc",
                   "compiler": f"{_NKI}.compile_config"}
OURS = {
    "nki": (_NKI, _NKI_SUBMODULES),
    "torch_neuronx": ("torchneuron.torch_neuronx", {}),
    # The legacy import name of NKI is the same language (its old index API stays refused), so
    # kernels that take `neuronxcc.nki.typing` annotations run unchanged.
    "neuronxcc": ("torchneuron.kernels.neuronxcc",
                  {"nki": _NKI} | {f"nki.{sub}": mod for sub, mod in _NKI_SUBMODULES.items()}),
}

# name -> distributions that may install AWS's package of that name
DISTRIBUTIONS = {
    "nki": ("nki", "neuronx-cc"),
    "torch_neuronx": ("torch-neuronx",),
    "neuronxcc": ("neuronx-cc",),
}

# PyPI holds placeholder releases of AWS's names (the real packages come from AWS's own
# index): a release at or below these versions is a placeholder, never the real package.
PLACEHOLDER_VERSIONS = {"nki": (0, 0, 1), "torch-neuronx": (1, 0), "neuronx-cc": (1, 0)}


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0].split(".post")[0]))


def real_package(name: str, shim_file: str | None = None) -> Path | None:
    """The `__init__.py` of AWS's real package `name`, or None when only a placeholder (or
    nothing, or this repository's own shim) provides the name."""
    for dist_name in DISTRIBUTIONS[name]:
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            continue
        limit = PLACEHOLDER_VERSIONS.get(dist_name)
        if limit is not None and _release(dist.version) <= limit:
            continue
        init = f"{name}/__init__.py"
        if not any(str(f).replace("\\", "/") == init for f in dist.files or ()):
            continue
        path = Path(dist.locate_file(init)).resolve()
        if path.is_file() and (shim_file is None or path != Path(shim_file).resolve()):
            return path
    return None


def _load_real(name: str, init: Path):
    spec = importlib.util.spec_from_file_location(name, init,
                                                  submodule_search_locations=[str(init.parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def bind(name: str, shim_file: str | None = None):
    """Makes `sys.modules[name]` AWS's real package where installed, else torchneuron's."""
    init = real_package(name, shim_file)
    if init is not None:
        return _load_real(name, init)
    target, submodules = OURS[name]
    module = importlib.import_module(target)
    for sub in submodules:
        sys.modules[f"{name}.{sub}"] = importlib.import_module(submodules[sub])
    sys.modules[name] = module
    return module
