"""Applies the fixes a scan attached to a module, then settles imports (`import torch` where a
fix wrote `torch.` and the module lacked it, and `from torch.cuda... import` lines left unused)
and writes out the accelerator the fixes named (hoist.py)."""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

from . import hoist
from .cst_util import dotted_name
from .findings import Scan


_Name = tuple[str, str | None, str | None]  # (module, object, alias) as RemoveImportsVisitor takes


class _Apply(cst.CSTTransformer):
    def __init__(self, scan: Scan):
        super().__init__()
        self.fixes = scan.fixes
        self.cuda_imports: list[_Name] = []

    def on_leave(self, original, updated):
        if isinstance(original, (cst.Import, cst.ImportFrom)):
            self.cuda_imports += _torch_cuda_names(original)
        fix = self.fixes.get(id(original))
        return fix(updated) if fix is not None else updated


def _torch_cuda_names(node: cst.Import | cst.ImportFrom) -> list[_Name]:
    """Names an import binds to torch.cuda or below. A plain `import torch.cuda` binds `torch`
    itself, so only aliased module imports are candidates for removal."""
    if isinstance(node.names, cst.ImportStar):
        return []
    out = []
    for alias in node.names:
        asname = alias.asname.name.value if alias.asname is not None else None
        name = dotted_name(alias.name)
        if isinstance(node, cst.Import):
            if asname is not None and _under_cuda(name):
                out.append((name, None, asname))
        elif node.module is not None and not node.relative:
            module = dotted_name(node.module)
            if _under_cuda(f"{module}.{name}"):
                out.append((module, name, asname))
    return out


def _under_cuda(name: str | None) -> bool:
    return name is not None and (name == "torch.cuda" or name.startswith("torch.cuda."))


def rewrite(module: cst.Module, scan: Scan) -> cst.Module:
    """`module` must be the tree the scan walked (the metadata wrapper's copy)."""
    if not scan.fixes:
        return module
    applier = _Apply(scan)
    new = module.visit(applier)
    context = CodemodContext()  # (the codemod visitors are slow to build: only when needed)
    if applier.cuda_imports:
        for module_name, obj, asname in applier.cuda_imports:  # removed only if now unused
            RemoveImportsVisitor.remove_unused_import(context, module_name, obj, asname)
        new = RemoveImportsVisitor(context).transform_module(new)
    if scan.needs_torch and not _imports_torch(new):
        AddImportsVisitor.add_needed_import(context, "torch")
        new = AddImportsVisitor(context).transform_module(new)
    return hoist.write_accelerator(new)


def _imports_torch(module: cst.Module) -> bool:
    """A top-level plain `import torch` (the name every fix writes)."""
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import) and any(
                        a.asname is None and dotted_name(a.name) == "torch" for a in small.names):
                    return True
    return False
