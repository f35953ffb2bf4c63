"""csrc/ is split by layer (the table of docs/architecture.md, read by layer_table.py): each
folder may include only its own headers and those of the layers below it, and csrc/python holds
the bindings and nothing else."""

import pathlib
import re

import pytest
from layer_table import layer_of as table_layer_of
from layer_table import layers, may_use

CSRC = pathlib.Path(__file__).resolve().parents[2] / "csrc"
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)
TABLE = layers()


def sources():
    return sorted(p for p in CSRC.rglob("*") if p.suffix in (".cpp", ".h"))


def layer_of(path: pathlib.Path):
    return layer_of_header(str(path.relative_to(CSRC)))


def layer_of_header(header: str):
    """The layer of csrc/<header> in the table (the launch decision's files are named there
    apart from the rest of csrc/aten)."""
    return table_layer_of(f"csrc/{header}", TABLE)


def test_every_source_lives_in_a_layer_folder():
    stray = [str(p.relative_to(CSRC)) for p in sources() if layer_of(p) is None]
    assert not stray, f"files outside the layer folders: {stray}"


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(CSRC)))
def test_includes_point_down(path):
    layer = layer_of(path)
    for header in INCLUDE.findall(path.read_text()):
        if "/" not in header:  # the seam's own header, included by its folder-local name
            assert layer.name == "runtime seam", \
                f"{path.name} includes {header} without its layer folder"
            continue
        target = layer_of_header(header)
        assert target is not None, f"{path.name} includes {header} from no layer"
        assert may_use(layer, target), (
            f"{path.relative_to(CSRC)} ({layer.name}) includes {header} ({target.name}), a layer "
            f"above or beside it")


def test_guard_and_allocator_do_not_include_each_other():
    guard = (CSRC / "device" / "NeuronGuard.cpp").read_text()
    allocator = (CSRC / "device" / "NeuronAllocator.cpp").read_text() + \
        (CSRC / "device" / "NeuronAllocator.h").read_text()
    assert "NeuronAllocator.h" not in guard
    assert "NeuronGuard" not in allocator


def test_python_folder_holds_bindings_only():
    for path in (CSRC / "python").iterdir():
        text = path.read_text()
        # The module, or a group of its functions that the module binds (bind_*(py::module&)).
        assert "PYBIND11_MODULE" in text or re.search(r"void bind_\w+\(py::module&", text), \
            f"{path.name}: csrc/python is for the bindings"
        # Registrations and kernels belong to their layers, not to the bindings.
        for marker in ("TORCH_LIBRARY", "REGISTER_", "C10_REGISTER", "make_tensor<"):
            assert marker not in text, f"{path.name} registers or builds tensors: {marker}"
