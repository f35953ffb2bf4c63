"""Python reaches C++ one layer at a time: `torchneuron._C` holds one submodule of bindings per
C++ layer (csrc/python/*Bindings.cpp) and nothing else, and a torchneuron module imports only the
submodules its layer's row of docs/architecture.md lets it use. The table's `_C` column is the
one copy of who uses what (a C++ layer "binds `_C.x`", a Python layer "uses `_C.x`, ..."), read by
layer_table.py; this file holds no list of its own."""

from __future__ import annotations

import ast
import pathlib
import re
import types

import pytest
from layer_table import ROOT, Layer, layer_of, layers
from test_import_circles import modules

TABLE = layers()
KNOWN = modules()
BINDINGS = ROOT / "csrc" / "python"
SUBMODULE = re.compile(r'def_submodule\(\s*"(\w+)"')
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)
# The package's __init__ loads the extension and binds the name torchneuron._C; every other
# module reaches it through a submodule.
LOADER = "torchneuron"


def bound() -> dict[str, Layer]:
    """Each submodule of torchneuron._C and the C++ layer whose row binds it."""
    out: dict[str, Layer] = {}
    for layer in TABLE:
        if layer.binds:
            assert layer.binds not in out, f"two layers bind _C.{layer.binds}"
            out[layer.binds] = layer
    return out


def reaches(name: str, source: str, is_package: bool) -> list[tuple[int, str | None]]:
    """Where module `name` reaches torchneuron._C: (line, submodule) for each name of a
    `from <...>._C import x`, (line, None) for a reach of `_C` itself (`from .. import _C`,
    `import torchneuron._C`, `torchneuron._C.x`)."""
    package = name.split(".") if is_package else name.split(".")[:-1]
    out: list[tuple[int, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if module == "torchneuron._C":
                out += [(node.lineno, a.name) for a in node.names]
            elif module == "torchneuron" and any(a.name == "_C" for a in node.names):
                out.append((node.lineno, None))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, None) for a in node.names
                    if a.name == "torchneuron._C" or a.name.startswith("torchneuron._C.")]
        elif (isinstance(node, ast.Attribute) and node.attr == "_C"
              and isinstance(node.value, ast.Name) and node.value.id == "torchneuron"):
            out.append((node.lineno, None))
    return out


def violations(name: str, repository_path: str, source: str) -> list[str]:
    """What module `name` (at `repository_path`) reaches in torchneuron._C against the table."""
    layer = layer_of(repository_path, TABLE)
    known = bound()
    found = []
    for line, submodule in reaches(name, source, repository_path.endswith("__init__.py")):
        if submodule is None:
            if name != LOADER:
                found.append(f"line {line}: reaches torchneuron._C itself; import the layer's "
                             f"submodule (from torchneuron._C import device as _device_c)")
        elif submodule not in known:
            found.append(f"line {line}: _C.{submodule} is no submodule the table binds "
                         f"({', '.join(sorted(known))})")
        elif layer is None or submodule not in layer.uses:
            owner = layer.name if layer else "unknown"
            found.append(f"line {line}: uses _C.{submodule} (the {known[submodule].name} layer), "
                         f"which the {owner} layer's row of docs/architecture.md does not list")
    return found


def repository_path(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT))


def test_every_submodule_is_bound_by_a_cpp_layer():
    for layer in TABLE:
        if layer.binds:
            assert layer.paths and all(p.startswith("csrc/") for p in layer.paths), \
                f"{layer.name} binds _C.{layer.binds} but is no C++ layer"
        for used in layer.uses:
            assert used in bound(), f"{layer.name} uses _C.{used}, which no C++ layer binds"


def test_c_holds_only_the_layers_submodules():
    from torchneuron import _C

    names = {n for n in vars(_C) if not (n.startswith("__") and n.endswith("__"))}
    flat = sorted(n for n in names if not isinstance(getattr(_C, n), types.ModuleType))
    assert not flat, f"torchneuron._C binds names outside a layer's submodule: {flat}"
    assert names == set(bound()), \
        f"torchneuron._C's submodules {sorted(names)} are not the table's {sorted(bound())}"


def binding_files() -> list[pathlib.Path]:
    return sorted(p for p in BINDINGS.glob("*.cpp") if p.name != "Module.cpp")


@pytest.mark.parametrize("path", binding_files(), ids=lambda p: p.name)
def test_each_binding_file_binds_one_layer(path):
    text = path.read_text()
    submodules = SUBMODULE.findall(text)
    assert len(submodules) == 1, f"{path.name} registers {submodules}: one submodule per file"
    layer = bound().get(submodules[0])
    assert layer is not None, f"{path.name} registers _C.{submodules[0]}, which no row binds"
    for header in INCLUDE.findall(text):
        if header.startswith("python/"):
            continue
        assert layer_of(f"csrc/{header}", TABLE) == layer, (
            f"{path.name} binds _C.{submodules[0]} ({layer.name}) but includes {header}: "
            f"another layer's functions belong in that layer's submodule")


def test_module_only_calls_the_registrations():
    text = (BINDINGS / "Module.cpp").read_text()
    assert "PYBIND11_MODULE" in text
    for marker in (".def(", "add_object(", "def_submodule("):
        assert marker not in text, f"Module.cpp binds ({marker}): that is a layer's file's job"
    registered = {m for path in binding_files() for m in SUBMODULE.findall(path.read_text())}
    assert registered == set(bound())
    called = set(re.findall(r"bind_(\w+)\(m\)", text))
    assert called == registered, f"Module.cpp calls bind_{sorted(called)}, files register " \
                                 f"{sorted(registered)}"


@pytest.mark.parametrize("name", sorted(n for n, p in KNOWN.items() if p.name != "__main__.py"))
def test_modules_use_only_their_layers_submodules(name):
    path = KNOWN[name]
    found = violations(name, repository_path(path), path.read_text())
    assert not found, f"{name}: " + "; ".join(found)


def test_each_listed_use_is_real():
    """The column lists what a layer uses, no more: a stale entry would hide a new use."""
    used: dict[str, set[str]] = {}
    for name, path in KNOWN.items():
        layer = layer_of(repository_path(path), TABLE)
        for _line, submodule in reaches(name, path.read_text(), path.name == "__init__.py"):
            if layer is not None and submodule is not None:
                used.setdefault(layer.name, set()).add(submodule)
    for layer in TABLE:
        stale = set(layer.uses) - used.get(layer.name, set())
        assert not stale, f"{layer.name} lists _C.{sorted(stale)}, which none of its modules uses"


def test_a_wrong_use_is_found(tmp_path):
    """The check fails on a use the table does not allow, on a flat reach of _C, and on a name
    that is no submodule; it passes the same file's allowed use."""
    cases = {
        "from .._C import compile as _compile_c\n": "uses _C.compile (the C++ compile layer)",
        "from .. import _C\n": "reaches torchneuron._C itself",
        "import torchneuron\ntorchneuron._C.runtime.device_count()\n": "reaches torchneuron._C",
        "from torchneuron._C import _device_count\n": "_C._device_count is no submodule",
    }
    for source, expected in cases.items():
        module = tmp_path / "kv_cache_size.py"
        module.write_text(source)
        found = violations("torchneuron.serving.kv_cache_size",
                           "torchneuron/serving/kv_cache_size.py", module.read_text())
        assert len(found) == 1 and expected in found[0], (source, found)
    assert not violations("torchneuron.serving.kv_cache_size",
                          "torchneuron/serving/kv_cache_size.py",
                          "from .._C import runtime as _runtime_c\n")
