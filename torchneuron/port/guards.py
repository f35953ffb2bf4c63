"""`port fix` never makes a program worse where a device test decides an `if`.

Rewriting `device.type == "cuda"` into `!= "cpu"` sends neuron into the code that test guards.
That is right only when all of that code runs on neuron after the fix: a guarded `model.cuda(d)`
or `nn.DataParallel` left as a finding would turn a program that ran (on neuron as on the CPU)
into one that crashes. So such a test stays as it is, a finding that names what it guards. And
under a test that stays (one the tool cannot prove, `device == "cuda"`, or one kept for that
reason) the code is left alone too: rewritten, it would look ported but never run on neuron (a
step timer never synchronized, peak-memory statistics never reset)."""

from __future__ import annotations

from . import rules
from .findings import Finding, Scan


def settle(scan: Scan) -> None:
    """Take back the fixes the rules above forbid; repeated until nothing changes, since a
    test kept makes its body's findings stay, which may keep an enclosing test."""
    cleared: set[int] = set()
    changed = True
    while changed:
        changed = False
        for test in scan.device_tests:
            if test.finding.fixable:
                blocker = next((f for f in _inside(scan, test.body) if _blocks(scan, f)), None)
                if blocker is not None:
                    test.finding.unfix(f"it guards {blocker.code} at line {blocker.line}, "
                                       "which would not run on neuron")
                    changed = True
            if not test.finding.fixable and id(test) not in cleared:
                cleared.add(id(test))
                for f in _inside(scan, test.branches):
                    if f.fixable:
                        f.unfix(f"under the device test at line {test.finding.line}, "
                                "which stays")
                        changed = True


def _blocks(scan: Scan, f: Finding) -> bool:
    """`f` is left as it is and would fail on neuron. A comparison with 'cuda' runs anywhere,
    and the code under a test that stays never runs on neuron."""
    if f.fixable or f.code == "TNP004" or rules.RULES[f.code].inert:
        return False
    return not any(not t.finding.fixable and f in _inside(scan, t.branches)
                   for t in scan.device_tests)


def _inside(scan: Scan, span: tuple[tuple[int, int], tuple[int, int]]) -> list[Finding]:
    start, end = span
    return [f for f in scan.findings if start <= (f.line, f.col) < end]

