"""What the scanner and its handlers (cuda_api, devices) share: a Finding, the Fix that rewrites
a node, the Scan that collects both for a module, and the Reporter the handlers report through.
Its own module so that the handlers need not import the scanner that calls them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

import libcst as cst

from . import rules

if TYPE_CHECKING:
    from .facts import Facts

Fix = Callable[[cst.CSTNode], cst.CSTNode]


@dataclass
class Finding:
    line: int
    col: int  # 1-based, like the line
    code: str
    message: str
    fixable: bool
    path: str = ""
    cell: int | None = None  # notebooks: 1-based cell index, and line/col inside that cell

    @property
    def hint(self) -> str:
        return "" if self.fixable else rules.RULES[self.code].hint


@dataclass
class Scan:
    findings: list[Finding] = field(default_factory=list)
    fixes: dict[int, Fix] = field(default_factory=dict)
    needs_torch: bool = False  # a fix wrote `torch.` into the module


class Reporter(Protocol):
    """What a handler may use of the scanner: the facts about the code, the nodes a parent
    already reported, and report()."""

    facts: Facts
    handled: set[int]

    def report(self, node: cst.CSTNode, code: str, message: str = "",
               fixes: dict[cst.CSTNode, Fix] | None = None, writes_torch: bool = True) -> None:
        ...
