"""Which build of torchneuron's C++ core (`torchneuron._C`) this process loads.

The core binds to ATen and c10 symbols whose layout changes between PyTorch releases, so one
checkout holds one build per torch version, side by side: setup.py writes
`torchneuron/_builds/torch-<torch.__version__>/_C*.so`, and `load()` picks the folder of the
running torch. Under the name `torchneuron._C` it is what `from torchneuron._C import device`
(each layer's submodule of bindings) and Inductor's generated wrapper find, whatever the torch
version.

This module imports nothing of torchneuron's (it runs first, from the package's __init__).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

MODULE_NAME = "torchneuron._C"
BUILDS = Path(__file__).resolve().parent.parent / "_builds"


def build_dir(torch_version: str) -> Path:
    """The folder setup.py builds into, and load() reads from, for one torch version."""
    return BUILDS / f"torch-{torch_version}"


def find(torch_version: str) -> Path:
    """The built core for `torch_version`; a FileNotFoundError says how to build it."""
    folder = build_dir(torch_version)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = folder / f"_C{suffix}"
        if candidate.is_file():
            return candidate
    built = sorted(p.name.removeprefix("torch-") for p in BUILDS.glob("torch-*")) if BUILDS.is_dir() else []
    raise FileNotFoundError(
        f"torchneuron's C++ core is not built for torch {torch_version} (looked in {folder}; "
        f"built for: {', '.join(built) or 'no torch version'}). Build it with this torch: "
        f"`python setup.py build_ext --inplace` (or `make setup` / `make setup-214`).")


def load(torch_version: str) -> ModuleType:
    """Imports the core built for `torch_version` as `torchneuron._C` (once per process)."""
    loaded = sys.modules.get(MODULE_NAME)
    if loaded is not None:
        return loaded
    path = find(torch_version)
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MODULE_NAME]
        raise
    return module
