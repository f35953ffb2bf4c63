"""How results are shown: one line per finding (`file:line:col CODE message`), a count per code,
or the same as JSON for tools."""

from __future__ import annotations

import json
from collections import Counter
from typing import TextIO

from . import rules
from .engine import FileResult
from .findings import Finding


def location(f: Finding) -> str:
    cell = f"cell {f.cell}:" if f.cell is not None else ""
    return f"{f.path}:{cell}{f.line}:{f.col}"


def finding_line(f: Finding) -> str:
    hint = f"; hint: {f.hint}" if f.hint else ""
    return f"{location(f)} {f.code} {f.message}{hint}"


def summary_lines(results: list[FileResult], fixing: bool) -> list[str]:
    findings = [f for r in results for f in r.findings]
    counts = Counter(f.code for f in findings)
    lines = [f"  {code}  {counts[code]:>5}  {rules.RULES[code].title}" for code in sorted(counts)]
    files_with = sum(1 for r in results if r.findings)
    skipped = sum(1 for r in results if r.errors and not r.findings and r.new_text is None)
    if fixing:
        fixed = sum(r.fixed for r in results)
        changed = sum(1 for r in results if r.new_text is not None)
        lines.append(f"Fixed {fixed} finding{_s(fixed)} in {changed} file{_s(changed)}; "
                     f"{len(findings)} left in {files_with} file{_s(files_with)}.")
    else:
        fixable = sum(f.fixable for f in findings)
        lines.append(f"Found {len(findings)} finding{_s(len(findings))} in {files_with} of "
                     f"{len(results)} file{_s(len(results))} ({fixable} fixable with "
                     "`torchneuron port fix`).")
    if skipped:
        lines.append(f"{skipped} file{_s(skipped)} could not be checked (see errors above).")
    return lines


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def text(results: list[FileResult], out: TextIO, err: TextIO, fixing: bool,
         diff: bool = False) -> None:
    listing = err if diff else out  # a --diff on stdout stays a clean patch
    for r in results:
        for e in r.errors:
            print(f"{r.path}: error: {e}", file=err)
        if diff and r.diff:
            out.write(r.diff)
        for f in r.findings:
            print(finding_line(f), file=listing)
    for line in summary_lines(results, fixing):
        print(line, file=listing)


def as_json(results: list[FileResult], out: TextIO, fixing: bool, diff: bool = False) -> None:
    findings = [f for r in results for f in r.findings]
    doc = {
        "files": len(results),
        "findings": [{"path": f.path, "cell": f.cell, "line": f.line, "col": f.col,
                      "code": f.code, "message": f.message, "fixable": f.fixable,
                      "hint": f.hint} for f in findings],
        "summary": dict(sorted(Counter(f.code for f in findings).items())),
        "errors": [{"path": r.path, "message": e} for r in results for e in r.errors],
    }
    if fixing:
        doc["fixed"] = sum(r.fixed for r in results)
        doc["changed"] = [r.path for r in results if r.new_text is not None]
    if diff:
        doc["diff"] = "".join(r.diff for r in results)
    json.dump(doc, out, indent=2)
    out.write("\n")


def codes_markdown() -> str:
    rows = ["| code | finds | `port fix` writes |", "|---|---|---|"]
    for r in rules.RULES.values():
        fix = r.fix or f"nothing; hint: {r.hint}"
        rows.append(f"| {r.code} | {r.title} | {fix} |".replace("\n", " "))
    return "\n".join(rows) + "\n"
