"""Jupyter notebooks: the code cells become one Python module (so an `import torch` in the first
cell counts in the last), and a rewritten module goes back into the cells it came from.
IPython magics (`%time`, `!pip`, `x = !ls`) stand aside as placeholders while Python is parsed."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from . import syntax

_MARKER = "# %% torchneuron-port cell {} %%"
_MARKER_LINE = re.compile(r"^# %% torchneuron-port cell (\d+) %%\n", re.MULTILINE)
_MAGIC = re.compile(r"^(\s*)([%!?]|\w+\s*=\s*[!%])")
_PLACEHOLDER = "{}pass  # torchneuron-port magic {}"
_PLACEHOLDER_LINE = re.compile(r"^\s*pass  # torchneuron-port magic (\d+)$")
_PYTHON_CELL_MAGICS = ("%%time", "%%timeit", "%%capture", "%%prun")


class NotebookError(ValueError):
    pass


@dataclass
class _Cell:
    index: int  # 1-based among all cells
    source: str  # Python, magics replaced
    trailing_newline: bool
    magics: list[str] = field(default_factory=list)
    start: int = 0  # first line in the joined module


@dataclass
class Notebook:
    data: dict
    text: str
    cells: list[_Cell]
    skipped: list[tuple[int, str]]  # (cell, why) for code cells that do not parse

    @classmethod
    def parse(cls, text: str) -> "Notebook":
        try:
            data = json.loads(text)
            raw_cells = data["cells"]
        except (ValueError, KeyError, TypeError) as e:
            raise NotebookError(f"not a notebook: {e}") from None
        cells, skipped = [], []
        for i, cell in enumerate(raw_cells, start=1):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            src = cell.get("source", "")
            src = "".join(src) if isinstance(src, list) else str(src)
            if src.startswith("%%") and not src.startswith(_PYTHON_CELL_MAGICS):
                continue  # %%bash, %%html ...: not Python
            c = _Cell(i, "", src.endswith("\n"))
            lines = src.split("\n")
            for n, line in enumerate(lines):
                m = _MAGIC.match(line)
                if m:  # `%%time` on the first line too: the rest of such a cell is Python
                    lines[n] = _PLACEHOLDER.format(m.group(1), len(c.magics))
                    c.magics.append(line)
            c.source = "\n".join(lines) + ("" if c.trailing_newline else "\n")
            try:
                syntax.check(c.source)
            except syntax.BadSyntax as e:
                skipped.append((i, f"skipped, {e}"))
                continue
            cells.append(c)
        return cls(data, text, cells, skipped)

    def python(self) -> str:
        parts, line = [], 1
        for k, c in enumerate(self.cells):
            if k:
                parts.append(_MARKER.format(c.index) + "\n")
                line += 1
            c.start = line
            parts.append(c.source)
            line += c.source.count("\n")
        return "".join(parts)

    def locate(self, line: int) -> tuple[int, int]:
        """(cell, line in cell) of a line of the joined module."""
        cell = max((c for c in self.cells if c.start <= line), key=lambda c: c.start,
                   default=None)
        if cell is None:
            return (self.cells[0].index if self.cells else 1), line
        return cell.index, line - cell.start + 1

    def with_python(self, source: str) -> str:
        """The notebook's JSON with each code cell replaced by its part of `source`."""
        pieces = _MARKER_LINE.split(source)
        chunks = [pieces[0]] + pieces[2::2]
        if len(chunks) != len(self.cells):
            raise NotebookError("cell markers were lost in the rewrite")
        changed = False
        for c, chunk in zip(self.cells, chunks):
            if chunk == c.source:
                continue
            changed = True
            lines = chunk.split("\n")
            for n, line in enumerate(lines):
                m = _PLACEHOLDER_LINE.match(line)
                if m:
                    lines[n] = c.magics[int(m.group(1))]
            new = "\n".join(lines)
            if not c.trailing_newline and new.endswith("\n"):
                new = new[:-1]
            cell = self.data["cells"][c.index - 1]
            as_list = isinstance(cell.get("source"), list)
            cell["source"] = new.splitlines(keepends=True) if as_list else new
        if not changed:
            return self.text
        indent = _indent_of(self.text)
        out = json.dumps(self.data, indent=indent, ensure_ascii=False)
        return out + ("\n" if self.text.endswith("\n") else "")


def _indent_of(text: str) -> int:
    m = re.search(r"\n( +)\"", text)
    return len(m.group(1)) if m else 1
