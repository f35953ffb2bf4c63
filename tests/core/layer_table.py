"""The layer table of docs/architecture.md, read by the layer tests: the one copy of the layers
(the tests hold none of their own)."""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
_PATH = re.compile(r"`([^`]+)`")


_BINDING = re.compile(r"`_C\.(\w+)`")


@dataclass(frozen=True)
class Layer:
    rank: float
    name: str
    paths: tuple[str, ...]  # repository paths; a folder ends with "/"
    binds: str | None = None  # a C++ layer's submodule of torchneuron._C ("binds `_C.x`")
    uses: tuple[str, ...] = ()  # the submodules a Python layer's modules use ("uses `_C.x`, ...")


def layers() -> list[Layer]:
    """The rows of the table under '## The layers' (rank | layer | where | _C | what it owns)."""
    text = ARCHITECTURE.read_text()
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if re.match(r"\| [\d.]+ \|", line)]
    out = []
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        submodules = tuple(_BINDING.findall(cells[3]))
        binds = submodules[0] if cells[3].startswith("binds ") else None
        uses = submodules if cells[3].startswith("uses ") else ()
        out.append(Layer(float(cells[0]), cells[1], tuple(_PATH.findall(cells[2])), binds, uses))
    return out


def layer_of(path: str, table: list[Layer] | None = None) -> Layer | None:
    """The layer of a repository path: the row that names it most closely (a file by its name
    before its folder)."""
    best, best_len = None, -1
    for layer in table or layers():
        for p in layer.paths:
            matches = path == p or (p.endswith("/") and path.startswith(p))
            if matches and len(p) > best_len:
                best, best_len = layer, len(p)
    return best


def may_use(user: Layer, used: Layer) -> bool:
    """A layer uses itself or a layer of lower rank, never a sibling of its own rank."""
    return user == used or used.rank < user.rank
