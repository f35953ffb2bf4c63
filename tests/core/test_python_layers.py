"""Python imports point down the layer table of docs/architecture.md, lazy imports included:
a module imports only modules of its own layer or of a layer of lower rank."""

import pathlib

import pytest
from layer_table import ROOT, Layer, layer_of, layers, may_use
from test_import_circles import imported, modules

PACKAGE = ROOT / "torchneuron"
# Read once for the whole file: every parametrized case looks up its module in them.
KNOWN = modules()
TABLE = layers()


def python_modules() -> dict[str, pathlib.Path]:
    # __main__ modules are entry points: nothing imports them, and they stand outside the table.
    return {name: path for name, path in KNOWN.items() if path.name != "__main__.py"}


def repository_path(path: pathlib.Path) -> str:
    return str(path.relative_to(ROOT))


def test_every_module_has_a_layer():
    stray = [repository_path(p) for p in python_modules().values()
             if layer_of(repository_path(p), TABLE) is None]
    assert not stray, f"modules in no layer of docs/architecture.md: {stray}"


def test_every_path_of_the_table_exists():
    missing = [p for layer in TABLE for p in layer.paths if not (ROOT / p).exists()]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


@pytest.mark.parametrize("name", sorted(python_modules()))
def test_imports_point_down(name):
    path = KNOWN[name]
    user = layer_of(repository_path(path), TABLE)
    for target in sorted(imported(name, path, KNOWN)):
        used = layer_of(repository_path(KNOWN[target]), TABLE)
        assert used is not None, f"{name} imports {target}, which is in no layer"
        assert may_use(user, used), (
            f"{name} ({user.name}, rank {user.rank:g}) imports {target} ({used.name}, rank "
            f"{used.rank:g}): a layer above or beside it in docs/architecture.md")


def test_an_upward_import_is_refused():
    low, high = Layer(7, "runtime", ("torchneuron/runtime/",)), Layer(9, "fusion", ())
    sibling = Layer(9, "kernels", ())
    assert may_use(high, low) and may_use(low, low)
    assert not may_use(low, high) and not may_use(high, sibling)
