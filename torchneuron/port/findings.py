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
    # what the fix rewrites (original node id -> Fix), kept with the finding so that a later
    # decision (guards.py) can take a fix back with its finding
    fixes: dict[int, Fix] = field(default_factory=dict, repr=False, compare=False)
    writes_torch: bool = field(default=False, repr=False, compare=False)

    def unfix(self, why: str) -> None:
        """The fix is not made after all; the finding stays, saying why."""
        if self.fixable:
            self.fixable = False
            self.fixes = {}
            self.message = self.message.split(" -> ", 1)[0] + f" (left as it is: {why})"

    @property
    def hint(self) -> str:
        return "" if self.fixable else rules.RULES[self.code].hint


@dataclass
class DeviceTest:
    """A device-type test (TNP004) that decides an `if`: `body` is the code it guards (what runs
    on the device the test selects), `branches` all of its code; (line, col) ranges, 1-based."""

    finding: Finding
    body: tuple[tuple[int, int], tuple[int, int]]
    branches: tuple[tuple[int, int], tuple[int, int]]


@dataclass
class Scan:
    findings: list[Finding] = field(default_factory=list)
    device_tests: list[DeviceTest] = field(default_factory=list)
    fixes: dict[int, Fix] = field(default_factory=dict)  # filled by settle()
    needs_torch: bool = False  # a fix wrote `torch.` into the module

    def settle(self) -> None:
        """The fixes of the findings still fixable, in the order they were found (two fixes of one
        node, such as a statement rewritten and comments moved onto it, run in that order)."""
        self.fixes = {}
        for f in self.findings:
            for target, fix in f.fixes.items():
                earlier = self.fixes.get(target)
                self.fixes[target] = fix if earlier is None else _then(earlier, fix)
        self.needs_torch = any(f.fixable and f.writes_torch for f in self.findings)


def _then(first: Fix, second: Fix) -> Fix:
    def both(upd: cst.CSTNode) -> cst.CSTNode:
        upd = first(upd)
        return second(upd) if isinstance(upd, cst.CSTNode) else upd
    return both


class Reporter(Protocol):
    """What a handler may use of the scanner: the facts about the code, the nodes a parent
    already reported, and report()."""

    facts: Facts
    handled: set[int]

    def report(self, node: cst.CSTNode, code: str, message: str = "",
               fixes: dict[cst.CSTNode, Fix] | None = None,
               writes_torch: bool = True) -> Finding | None:
        ...

    def device_test(self, finding: Finding | None, test: cst.CSTNode) -> None:
        ...
