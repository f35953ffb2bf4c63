"""Applies the fixes a scan attached to a module, then settles imports: `import torch` where a
fix wrote `torch.` and the module lacked it, and `from torch.cuda... import` lines left unused."""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

from .cst_util import dotted_name
from .scanner import Scan


class _Apply(cst.CSTTransformer):
    def __init__(self, scan: Scan):
        super().__init__()
        self.fixes = scan.fixes
        self.cuda_imports: list[cst.CSTNode] = []

    def on_leave(self, original, updated):
        if isinstance(original, cst.ImportFrom) and _from_torch_cuda(original):
            self.cuda_imports.append(updated)
        fix = self.fixes.get(id(original))
        return fix(updated) if fix is not None else updated


def _from_torch_cuda(node: cst.ImportFrom) -> bool:
    module = dotted_name(node.module) if node.module is not None and not node.relative else None
    return module is not None and (module == "torch.cuda" or module.startswith("torch.cuda."))


def rewrite(module: cst.Module, scan: Scan) -> cst.Module:
    """`module` must be the tree the scan walked (the metadata wrapper's copy)."""
    if not scan.fixes:
        return module
    applier = _Apply(scan)
    new = module.visit(applier)
    context = CodemodContext()
    for node in applier.cuda_imports:  # removed only where nothing uses the name any more
        RemoveImportsVisitor.remove_unused_import_by_node(context, node)
    new = RemoveImportsVisitor(context).transform_module(new)
    if scan.needs_torch:
        AddImportsVisitor.add_needed_import(context, "torch")
        new = AddImportsVisitor(context).transform_module(new)
    return new
