"""One file through the tool: read, parse, scan, and for `fix` rewrite, check that the result
parses, rescan it (what is left is what could not be fixed) and write it."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper

from . import conditions, guards, rules, sources, syntax
from .facts import Facts
from .findings import Finding
from .notebook import Notebook, NotebookError
from .rewriter import rewrite
from .scanner import Scanner


class PortError(ValueError):
    """Source the tool cannot handle; the message says where and why."""


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)  # after a fix: what is left
    fixed: int = 0  # findings a fix removed
    errors: list[str] = field(default_factory=list)
    new_text: str | None = None  # a fix that changed something
    diff: str = ""


def scan_source(source: str, enabled: Callable[[str], bool] = lambda c: True,
                fix: bool = False) -> tuple[list[Finding], str]:
    """Findings in Python `source`, and the source after the fixes (the same text if not `fix`)."""
    try:
        syntax.check(source)
    except syntax.BadSyntax as e:
        raise PortError(str(e)) from None
    if not any(t in source for t in rules.TRIGGERS):
        return [], source  # nothing to find
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as e:
        raise PortError(f"{e.raw_line}:{e.raw_column + 1}: syntax error: {e.message}") from None
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)  # parsed here, used once
    facts = Facts(module)
    scanner = Scanner(source.splitlines(), facts, enabled)
    facts.accelerator_test = lambda test: conditions.proves_accelerator(scanner, test)
    with facts.resolve(wrapper):
        wrapper.visit(scanner)
    guards.settle(scanner.scan)
    scanner.scan.settle()
    findings = sorted(scanner.scan.findings, key=lambda f: (f.line, f.col, f.code))
    new = rewrite(wrapper.module, scanner.scan).code if fix and scanner.scan.fixes else source
    for f in findings:
        f.fixes = {}  # used: a result that crosses processes (-j) carries no closures
    if new is source:
        return findings, source
    try:
        cst.parse_module(new)
    except cst.ParserSyntaxError as e:  # a bug in a fix: never write what does not parse
        raise PortError(f"the rewrite does not parse ({e.message}); file left unchanged") from None
    try:
        compile(source, "<original>", "exec")
    except (SyntaxError, ValueError):
        pass  # newer syntax than this Python: libcst's parse above is the check
    else:
        try:
            compile(new, "<rewritten>", "exec")
        except (SyntaxError, ValueError) as e:
            raise PortError(f"the rewrite does not compile ({e}); file left unchanged") from None
    return findings, new


def process(path: str, fix: bool = False, write: bool = True,
            enabled: Callable[[str], bool] = lambda c: True) -> FileResult:
    """Check (or fix) one file. Never raises for bad input: it becomes an error in the result."""
    result = FileResult(path)
    try:
        text, bom = sources.read(path)
        notebook = Notebook.parse(text) if path.endswith(".ipynb") else None
    except (sources.SourceError, NotebookError) as e:
        result.errors.append(str(e))
        return result
    python = notebook.python() if notebook else text
    if notebook:
        result.errors += [f"cell {i}: {why}" for i, why in notebook.skipped]
    try:
        before, new_python = scan_source(python, enabled, fix)
        after = scan_source(new_python, enabled)[0] if new_python != python else before
        new_text = notebook.with_python(new_python) if notebook else new_python
    except (PortError, NotebookError) as e:
        result.errors.append(str(e))
        return result
    except RecursionError:
        result.errors.append("too deeply nested to parse")
        return result
    for f in after:
        f.path = path
        if notebook:
            f.cell, f.line = notebook.locate(f.line)
    result.findings = after
    result.fixed = len(before) - len(after)
    if new_text != text:
        result.new_text = new_text
        result.diff = "".join(difflib.unified_diff(
            text.splitlines(keepends=True), new_text.splitlines(keepends=True),
            fromfile=f"a/{path.lstrip('/')}", tofile=f"b/{path.lstrip('/')}"))
        if write:
            try:
                sources.write(path, new_text, bom)
            except OSError as e:
                result.errors.append(f"could not write: {e}")
    return result
