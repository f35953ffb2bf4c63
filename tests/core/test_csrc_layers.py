"""csrc/ is split by layer (DESIGN.md's table): each folder may include only its own headers and
those of the layers below it, and csrc/python holds the bindings and nothing else."""

import pathlib
import re

import pytest

CSRC = pathlib.Path(__file__).resolve().parents[2] / "csrc"

# Bottom-up. compile and distributed are siblings: neither includes the other.
# profiler: the kernel-activity and memory-history recorders, which device/ and aten/ call.
# launch: the launch decision (aten/Launch.*), a layer of its own below the C++ core although it
# lives in csrc/aten: every op's inline / queued / held decision over the runtime's streams,
# which the allocator, the guard and the kernels ask.
RANK = {"runtime": 0, "profiler": 1, "launch": 1.5, "device": 2, "aten": 3, "ops": 4,
        "compile": 5, "distributed": 5, "python": 6}
LAUNCH_FILES = ("aten/Launch.h", "aten/Launch.cpp")
INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def sources():
    return sorted(p for p in CSRC.rglob("*") if p.suffix in (".cpp", ".h"))


def layer_of(path: pathlib.Path) -> str:
    return layer_of_header(str(path.relative_to(CSRC)))


def layer_of_header(header: str) -> str:
    return "launch" if header in LAUNCH_FILES else header.split("/")[0]


def test_every_source_lives_in_a_layer_folder():
    stray = [str(p.relative_to(CSRC)) for p in sources() if layer_of(p) not in RANK]
    assert not stray, f"files outside the layer folders: {stray}"


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(CSRC)))
def test_includes_point_down(path):
    layer = layer_of(path)
    for header in INCLUDE.findall(path.read_text()):
        if "/" not in header:  # the seam's own header, included by its folder-local name
            assert layer == "runtime", f"{path.name} includes {header} without its layer folder"
            continue
        target = layer_of_header(header)
        assert target in RANK, f"{path.name} includes {header} from no layer"
        assert target == layer or RANK[target] < RANK[layer], (
            f"{path.relative_to(CSRC)} ({layer}) includes {header} ({target}), a layer above or "
            f"beside it")


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
