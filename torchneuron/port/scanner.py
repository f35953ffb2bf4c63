"""Walks one parsed module and records every CUDA-ism as a Finding (findings.py), handing the
torch.cuda API to cuda_api and device arguments to devices. Where an exact rewrite exists the
finding carries it: a function from the (already rewritten) node to its replacement, keyed by the
original node. The rewriter applies them; `check` only reports them, so the two never disagree
about what is fixable."""

from __future__ import annotations

import re
from typing import Callable

import libcst as cst
from libcst.metadata import PositionProvider

from . import conditions, cuda_api, devices, rules
from .cst_util import cuda_device_string, dotted_name, string_value
from .facts import Facts
from .findings import DeviceTest, Finding, Fix, Scan

_NOQA = re.compile(r"#\s*noqa:\s*([A-Z0-9,\s]+)", re.IGNORECASE)


class Scanner(cst.CSTVisitor):
    """The walk over one module; the handlers (cuda_api, devices) report through it, as a
    findings.Reporter."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, lines: list[str], facts: Facts,
                 enabled: Callable[[str], bool] = lambda code: True):
        super().__init__()
        self.lines = lines
        self.facts = facts
        self.enabled = enabled
        self.scan = Scan()
        self.handled: set[int] = set()  # nodes a parent already reported

    # ---- reporting ------------------------------------------------------------------------------
    def report(self, node: cst.CSTNode, code: str, message: str = "",
               fixes: dict[cst.CSTNode, Fix] | None = None,
               writes_torch: bool = True) -> Finding | None:
        pos = self.get_metadata(PositionProvider, node).start
        if not self.enabled(code) or self._suppressed(pos.line, code):
            return None
        rule = rules.RULES[code]
        fixable = bool(fixes)
        text = message or rule.title
        text += f" -> {rule.fix}" if fixable and rule.fix else ""
        finding = Finding(pos.line, pos.column + 1, code, text, fixable,
                          fixes={id(target): fix for target, fix in (fixes or {}).items()},
                          writes_torch=writes_torch)
        self.scan.findings.append(finding)
        return finding

    def device_test(self, finding: Finding | None, test: cst.CSTNode) -> None:
        """`test` (reported as `finding`) decides an `if`: guards.py settles it with its body."""
        node, parent = test, self.facts.parent(test)
        while isinstance(parent, (cst.BooleanOperation, cst.UnaryOperation)):
            node, parent = parent, self.facts.parent(parent)
        if (finding is None or not isinstance(parent, (cst.If, cst.IfExp))
                or node is not parent.test):
            return
        body = self._span(parent.body)
        last = parent.orelse if parent.orelse is not None else parent.body
        self.scan.device_tests.append(DeviceTest(finding, body, (body[0], self._span(last)[1])))

    def _span(self, node: cst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
        r = self.get_metadata(PositionProvider, node)
        return (r.start.line, r.start.column + 1), (r.end.line, r.end.column + 1)

    def _suppressed(self, line: int, code: str) -> bool:
        m = _NOQA.search(self.lines[line - 1]) if line <= len(self.lines) else None
        return bool(m) and code in {c.strip().upper() for c in m.group(1).split(",")}

    # ---- the walk -------------------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            if (dotted_name(alias.name) or "").split(".")[0] == "triton":
                self.report(node, "TNP402", "`import triton`")
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        module = dotted_name(node.module) if node.module is not None else None
        if module and module.split(".")[0] == "triton" and not node.relative:
            self.report(node, "TNP402", f"`from {module} import ...`")
        return False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        q = self.facts.qname(func)
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda" and q != "torch.cuda":
            devices.dot_cuda(self, node)
        elif q is not None and q.startswith("torch.cuda."):
            self.handled.add(id(func))
            cuda_api.reference(self, node, q, call=node)
        elif q == "torch.device":
            devices.torch_device(self, node)
        elif q in rules.PROCESS_GROUP_FUNCS:
            devices.process_group(self, node, rules.PROCESS_GROUP_FUNCS[q])
        elif q in rules.DDP_FUNCS:
            devices.ddp(self, node)
        elif q in rules.DATA_PARALLEL_FUNCS:
            self.report(node, "TNP503")
        devices.pin_memory_device(self, node)
        devices.integer_device(self, node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        conditions.idiom(self, node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if id(node) in self.handled:
            return False
        q = self.facts.qname(node)
        if q is None:
            if node.attr.value == "is_cuda":
                self.report(node.attr, "TNP003")
            return True
        return self._reference(node, q)

    def visit_Name(self, node: cst.Name) -> bool:
        if id(node) in self.handled:
            return False
        q = self.facts.qname(node)
        if q is not None and q != node.value:  # imported under this name
            return self._reference(node, q)
        return True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if id(node) in self.handled or isinstance(self.facts.parent(node), cst.Expr):
            return  # reported by a parent, or a docstring
        value = string_value(node)
        if value is None:
            return
        if cuda_device_string(value):
            devices.device_string(self, node, value)
        elif value.lower() == "nccl" and devices.nccl_option_default(self, node):
            pass
        elif value.lower() == "nccl" or "cuda:nccl" in value.lower():
            self.report(node, "TNP501", f"{node.value} names NCCL")
        elif value in rules.COMPILE_MODES:
            self.report(node, "TNP401", f"compile mode {node.value}")
        else:
            self._env_var(node, value)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        head = node.parts[0] if node.parts else None
        if (isinstance(head, cst.FormattedStringText) and len(node.parts) > 1
                and cuda_device_string(head.value)):
            devices.device_string(self, node, head.value)

    # ---- references to torch.cuda / torch.backends / inductor --------------------------------
    def _reference(self, node: cst.CSTNode, q: str) -> bool:
        if q == "torch.cuda" or q.startswith("torch.cuda."):
            cuda_api.reference(self, node, q, call=None)
            return False
        if q.startswith(("torch.backends.cuda", "torch.backends.cudnn")):
            key = max((k for k in rules.BACKENDS if q == k or q.startswith(k + ".")), key=len,
                      default=None)
            if key is not None:
                self.report(node, rules.BACKENDS[key], f"`{q}`")
                return False
        if q.startswith("torch._inductor.config.triton"):
            self.report(node, "TNP402", f"`{q}`")
            return False
        return True

    def _env_var(self, node: cst.SimpleString, value: str) -> None:
        if value in rules.ENV_VARS:
            self.report(node, rules.ENV_VARS[value], f"environment variable {value}")
        elif value.startswith(rules.NCCL_ENV_PREFIXES) and _env_name(value):
            self.report(node, "TNP602", f"environment variable {value}")
        elif value.startswith(rules.CUDA_ENV_PREFIXES) and _env_name(value):
            self.report(node, "TNP603", f"environment variable {value}")


def _env_name(value: str) -> bool:
    return re.fullmatch(r"[A-Z][A-Z0-9_]+", value) is not None
