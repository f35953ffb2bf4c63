"""Walks one parsed module and records every CUDA-ism as a Finding. Where an exact rewrite exists
the finding carries it: a function from the (already rewritten) node to its replacement, keyed by
the original node. The rewriter applies them; `check` only reports them, so the two never
disagree about what is fixable."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import libcst as cst
from libcst.metadata import (
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    QualifiedNameSource,
    ScopeProvider,
)

from . import rules
from .cst_util import (
    as_keyword,
    as_positional,
    cuda_device_string,
    dotted_name,
    expr,
    find_arg,
    fit,
    insert_first,
    keyword,
    new_arg,
    other_quote,
    parenthesize,
    positional,
    remove_arg,
    root_name,
    same_quote,
    string_value,
    tidy_commas,
)

Fix = Callable[[cst.CSTNode], cst.CSTNode]
_NOQA = re.compile(r"#\s*noqa:\s*([A-Z0-9,\s]+)", re.IGNORECASE)


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


class Scanner(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ParentNodeProvider,
                             ScopeProvider)

    def __init__(self, lines: list[str], enabled: Callable[[str], bool] = lambda code: True):
        super().__init__()
        self.lines = lines
        self.enabled = enabled
        self.scan = Scan()
        self.handled: set[int] = set()  # nodes a parent already reported
        self.int_options: set[str] = set()  # argparse dests declared with type=int

    # ---- reporting ------------------------------------------------------------------------------
    def report(self, node: cst.CSTNode, code: str, message: str = "",
               fixes: dict[cst.CSTNode, Fix] | None = None, writes_torch: bool = True) -> None:
        pos = self.get_metadata(PositionProvider, node).start
        if not self.enabled(code) or self._suppressed(pos.line, code):
            return
        rule = rules.RULES[code]
        fixable = bool(fixes)
        text = message or rule.title
        text += f" -> {rule.fix}" if fixable and rule.fix else ""
        self.scan.findings.append(Finding(pos.line, pos.column + 1, code, text, fixable))
        for target, fix in (fixes or {}).items():
            self.scan.fixes[id(target)] = fix
        if fixable and writes_torch:
            self.scan.needs_torch = True

    def _suppressed(self, line: int, code: str) -> bool:
        m = _NOQA.search(self.lines[line - 1]) if line <= len(self.lines) else None
        return bool(m) and code in {c.strip().upper() for c in m.group(1).split(",")}

    # ---- metadata helpers -----------------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.get_metadata(ParentNodeProvider, node, None)

    def qname(self, node: cst.CSTNode) -> str | None:
        """What a name or attribute chain refers to, through imports; None for local values.
        Code that never imports torch (a notebook cell, a snippet) is read as written."""
        if dotted_name(node) is None:  # `f(x).to`: libcst would say "f.to"
            return None
        names = self.get_metadata(QualifiedNameProvider, node, set())
        found = sorted(q.name for q in names
                       if q.source in (QualifiedNameSource.IMPORT, QualifiedNameSource.BUILTIN))
        if found:
            return found[0]
        if names:
            return None
        root = root_name(node)
        if root is None or self.get_metadata(QualifiedNameProvider, root, set()):
            return None
        return dotted_name(node)

    def _assigned_values(self, name: cst.Name) -> list[cst.CSTNode] | None:
        """Every value ever bound to `name` in its scope, or None if some binding is not a plain
        assignment (a parameter, a loop, an import ...)."""
        scope = self.get_metadata(ScopeProvider, name, None)
        if scope is None:
            return None
        values = []
        for assignment in scope[name.value]:
            node = getattr(assignment, "node", None)
            target = self.parent(node) if node is not None else None
            stmt = self.parent(target) if target is not None else None
            if isinstance(target, cst.AssignTarget) and isinstance(stmt, cst.Assign):
                values.append(stmt.value)
            elif isinstance(node, cst.Param):
                values.append(node)
            elif isinstance(target, cst.For) and target.target is node:
                values.append(target)
            else:
                return None
        return values or None

    def proves_available(self, test: cst.CSTNode) -> bool:
        """True when `test` being true means an accelerator is available."""
        if isinstance(test, cst.Call):
            return self.qname(test.func) in rules.AVAILABILITY_FUNCS
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            return self.proves_available(test.left) or self.proves_available(test.right)
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            count = (isinstance(test.left, cst.Call)
                     and self.qname(test.left.func) in ("torch.cuda.device_count",
                                                        "torch.accelerator.device_count"))
            return count and isinstance(target.comparator, cst.Integer) and (
                (isinstance(target.operator, cst.GreaterThan) and target.comparator.value == "0")
                or (isinstance(target.operator, cst.GreaterThanEqual)
                    and target.comparator.value == "1"))
        if isinstance(test, cst.Name):
            values = self._assigned_values(test)
            return bool(values) and all(isinstance(v, cst.BaseExpression)
                                        and self.proves_available(v) for v in values)
        return False

    def _proves_absent(self, test: cst.CSTNode) -> bool:
        return (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
                and self.proves_available(test.expression))

    def guarded(self, node: cst.CSTNode) -> bool:
        """Inside code that only runs when an accelerator is available."""
        child, parent = node, self.parent(node)
        while parent is not None:
            if isinstance(parent, (cst.IfExp, cst.If)):
                if child is parent.body and self.proves_available(parent.test):
                    return True
                if child is parent.orelse and self._proves_absent(parent.test):
                    return True
            if (isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.And)
                    and child is parent.right and self.proves_available(parent.left)):
                return True
            child, parent = parent, self.parent(parent)
        return False

    def is_index(self, node: cst.CSTNode) -> bool:
        """Provably an int (so a device index), from literals, int(), ranks and assignments."""
        if isinstance(node, cst.Integer):
            return True
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            return self.is_index(node.expression)
        if isinstance(node, cst.Call):
            return self.qname(node.func) in rules.INT_FUNCS
        if isinstance(node, cst.BinaryOperation) and isinstance(
                node.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)):
            return self.is_index(node.left) and self.is_index(node.right)
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            return node.attr.value in self.int_options and self.qname(node) is None
        if isinstance(node, cst.Name):
            values = self._assigned_values(node)
            return bool(values) and all(self._binds_int(v) for v in values)
        return False

    def _binds_int(self, value: cst.CSTNode) -> bool:
        if isinstance(value, cst.Param):
            ann = value.annotation
            return ann is not None and isinstance(ann.annotation, cst.Name) \
                and ann.annotation.value == "int"
        if isinstance(value, cst.For):
            it = value.iter
            return isinstance(it, cst.Call) and self.qname(it.func) == "builtins.range"
        return self.is_index(value)

    def device_type(self, node: cst.CSTNode, quote: str = '"') -> str:
        return rules.GUARDED_TYPE if self.guarded(node) else rules.device_type_expr(quote)

    # ---- the walk -------------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        node.visit(_IntOptions(self.int_options))

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
        q = self.qname(func)
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda" and q != "torch.cuda":
            self._dot_cuda(node)
        elif q is not None and q.startswith("torch.cuda."):
            self.handled.add(id(func))
            self._api(node, q, call=node)
        elif q == "torch.device":
            self._torch_device(node)
        elif q in rules.PROCESS_GROUP_FUNCS:
            self._process_group(node, rules.PROCESS_GROUP_FUNCS[q])
        elif q in rules.DDP_FUNCS:
            self._ddp(node)
        elif q in rules.DATA_PARALLEL_FUNCS:
            self.report(node, "TNP503")
        for i, arg in enumerate(node.args):
            if keyword(arg) == "pin_memory_device" and cuda_device_string(string_value(arg.value)):
                self.handled.add(id(arg.value))
                self.report(arg, "TNP007", writes_torch=False, fixes={
                    node: lambda upd, i=i: upd.with_changes(args=remove_arg(upd.args, i))})

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if id(node) in self.handled:
            return False
        q = self.qname(node)
        if q is None:
            if node.attr.value == "is_cuda":
                self.report(node.attr, "TNP003")
            return True
        return self._reference(node, q)

    def visit_Name(self, node: cst.Name) -> bool:
        if id(node) in self.handled:
            return False
        q = self.qname(node)
        if q is not None and q != node.value:  # imported under this name
            return self._reference(node, q)
        return True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if id(node) in self.handled or isinstance(self.parent(node), cst.Expr):
            return  # reported by a parent, or a docstring
        value = string_value(node)
        if value is None:
            return
        if cuda_device_string(value):
            self._device_string(node, value)
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
            self._device_string(node, head.value)

    # ---- references to torch.cuda / torch.backends / inductor --------------------------------
    def _reference(self, node: cst.CSTNode, q: str) -> bool:
        if q == "torch.cuda" or q.startswith("torch.cuda."):
            self._api(node, q, call=None)
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

    def _api(self, node: cst.CSTNode, q: str, call: cst.Call | None) -> None:
        name = q[len("torch.cuda."):] if q != "torch.cuda" else ""
        name = name.removeprefix("memory.") if name.startswith("memory.") else name
        api = rules.CUDA_API.get(name)
        shown = f"`{q}()`" if call is not None else f"`{q}`"
        if api is None:
            head = name.split(".")[0]
            if name in rules.LEGACY_TYPES:
                code = "TNP006"
            elif head in rules.CUDA_API and rules.CUDA_API[head].target is None:
                code = rules.CUDA_API[head].code  # e.g. torch.cuda.nvtx.range_push
            else:
                code = "TNP199"
            self.report(node, code, shown)
            return
        if api.target is None:
            self.report(node, api.code, shown)
        elif call is None:
            self._bare_reference(node, api, shown)
        else:
            fixes = self._fix_api_call(call, api)
            self.report(node, api.code, shown, fixes=fixes)

    def _bare_reference(self, node: cst.CSTNode, api: rules.Api, shown: str) -> None:
        parent = self.parent(node)
        target = api.target
        fixes = None
        if isinstance(parent, cst.Decorator) and api.kind == "custom_fwd":
            dev = self.device_type(node)
            fixes = {node: lambda upd: cst.Call(func=expr(target),
                                                args=[new_arg(expr(dev), "device_type")])}
        elif api.bare and not isinstance(parent, cst.AssignTarget):
            fixes = {node: lambda upd: expr(target)}
        self.report(node, api.code, shown, fixes=fixes)

    def _fix_api_call(self, call: cst.Call, api: rules.Api) -> dict[cst.CSTNode, Fix] | None:
        target = expr(api.target)
        args = call.args
        if any(a.star for a in args):
            return None
        kind = api.kind
        fixes: dict[cst.CSTNode, Fix] = {}
        if kind == "rename":
            def fix(upd: cst.Call) -> cst.CSTNode:
                new_args = list(upd.args)
                if api.target.startswith("torch.accelerator."):  # positional-only parameters
                    for i, a in enumerate(new_args):
                        if keyword(a) in ("device", "device_index"):
                            new_args = [as_positional(a)] + new_args[:i] + new_args[i + 1:]
                return upd.with_changes(func=target, args=tidy_commas(new_args))
            if api.absent is not None and not self.guarded(call):
                line = self._alone_on_line(call)
                if line is not None and api.absent == "None":
                    fixes[line] = _guard_statement
                else:
                    rename, parent, absent = fix, self.parent(call), api.absent
                    fix = lambda upd: fit(cst.IfExp(  # noqa: E731
                        test=expr(rules.AVAILABLE), body=rename(upd), orelse=expr(absent)), parent)
            fixes[call] = fix
        elif kind == "event":
            if len(positional(args)) > len(rules.EVENT_PARAMS):
                return None
            fixes[call] = lambda upd: upd.with_changes(func=target, args=tidy_commas(
                [as_keyword(a, rules.EVENT_PARAMS[i]) if a.keyword is None else a
                 for i, a in enumerate(upd.args)]))
        elif kind == "stream":
            if positional(args) or any(keyword(a) != "priority" for a in args):
                return None
            fixes[call] = lambda upd: upd.with_changes(func=target)
        elif kind == "index":
            found = find_arg(args, "device", 0)
            if found is None or len(args) != 1 or not (
                    self.is_index(found[1].value) or isinstance(found[1].value, cst.Name)
                    and found[1].value.value == "None"):
                return None
            fixes[call] = lambda upd: upd.with_changes(
                func=target, args=[as_positional(upd.args[0]).with_changes(
                    comma=cst.MaybeSentinel.DEFAULT)])
        elif kind == "seed":
            if not self._next_to_torch_seed(call):
                return None
            fixes[call] = lambda upd: upd.with_changes(func=target)
        elif kind == "autocast":
            if len(positional(args)) > len(rules.AUTOCAST_PARAMS):
                return None
            dev = self.device_type(call)
            fixes[call] = lambda upd: upd.with_changes(func=target, args=insert_first(
                [as_keyword(a, rules.AUTOCAST_PARAMS[i]) if a.keyword is None else a
                 for i, a in enumerate(upd.args)], new_arg(expr(dev), "device_type")))
        elif kind == "grad_scaler":
            dev = self.device_type(call)
            fixes[call] = lambda upd: upd.with_changes(
                func=target, args=insert_first(upd.args, new_arg(expr(dev))))
        elif kind == "custom_fwd":
            dev = self.device_type(call)
            fixes[call] = lambda upd: upd.with_changes(
                func=target, args=tidy_commas([*upd.args, new_arg(expr(dev), "device_type")]))
        return fixes

    def _alone_on_line(self, call: cst.Call) -> cst.SimpleStatementLine | None:
        stmt = self.parent(call)
        line = self.parent(stmt) if isinstance(stmt, cst.Expr) else None
        if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
            return line
        return None

    def _next_to_torch_seed(self, call: cst.Call) -> bool:
        """`torch.cuda.manual_seed_all(s)` next to `torch.manual_seed(s)` (only other seeding in
        between): replacing it by another `torch.manual_seed(s)` changes no RNG state."""
        if len(call.args) != 1 or call.args[0].keyword is not None:
            return False
        seed = cst.Module([]).code_for_node(call.args[0].value)
        stmt = self.parent(self.parent(call))
        block = self.parent(stmt)
        if not isinstance(stmt, cst.SimpleStatementLine) or block is None:
            return False
        body = list(block.body)
        at = body.index(stmt)
        for direction in (-1, 1):
            i = at + direction
            while 0 <= i < len(body):
                c = _only_call(body[i])
                if c is None:
                    break
                if (self.qname(c.func) == "torch.manual_seed" and len(c.args) == 1
                        and cst.Module([]).code_for_node(c.args[0].value) == seed):
                    return True
                if "seed" not in (dotted_name(c.func) or ""):
                    break
                i += direction
        return False

    # ---- calls with a device or backend argument ---------------------------------------------
    def _dot_cuda(self, call: cst.Call) -> None:
        found = find_arg(call.args, "device", 0)
        rest = [a for a in call.args if found is None or a is not found[1]]
        if any(a.star for a in call.args) or any(keyword(a) not in (
                "non_blocking", "memory_format") for a in rest):
            self.report(call.func.attr, "TNP001")
            return
        value = found[1].value if found else None
        if self._in_map_location(call):  # a storage: its .to() takes no positional device
            self.report(call.func.attr, "TNP001", "`.cuda()` in `map_location`")
            return
        if value is None or (isinstance(value, cst.Name) and value.value == "None"):
            device = rules.ACCEL
        elif self.is_index(value):
            device = None  # built from the rewritten index below
        else:
            self.report(call.func.attr, "TNP001")
            return
        dev_type = self.device_type(call)

        def fix(upd: cst.Call) -> cst.Call:
            kept = [a for a in upd.args if keyword(a) in ("non_blocking", "memory_format")]
            if device is not None:
                dest = expr(device)
            else:
                index = find_arg(upd.args, "device", 0)[1].value
                dest = cst.Call(func=expr("torch.device"),
                                args=tidy_commas([new_arg(expr(dev_type)), new_arg(index)]))
            return upd.with_changes(func=upd.func.with_changes(attr=cst.Name("to")),
                                    args=tidy_commas([new_arg(dest), *kept]))
        self.report(call.func.attr, "TNP001", fixes={call: fix})

    def _in_map_location(self, node: cst.CSTNode) -> bool:
        parent = self.parent(node)
        while parent is not None and not isinstance(parent, cst.Lambda):
            parent = self.parent(parent)
        arg = self.parent(parent) if parent is not None else None
        return isinstance(arg, cst.Arg) and keyword(arg) == "map_location"

    def _torch_device(self, call: cst.Call) -> None:
        if len(call.args) != 1 or call.args[0].keyword is not None:
            return
        string = call.args[0].value
        value = string_value(string)
        if not cuda_device_string(value) or value == "cuda:":
            return
        self.handled.add(id(string))
        guarded = self.guarded(call)
        quote = same_quote(string)
        parent = self.parent(call)
        if value == "cuda":
            new = expr(rules.ACCEL if guarded else rules.device_expr(quote))
            fix = lambda upd: fit(new, parent)  # noqa: E731
        else:
            dev_type = self.device_type(call, quote)
            index = value.split(":")[1]
            fix = lambda upd: upd.with_changes(args=tidy_commas(  # noqa: E731
                [new_arg(expr(dev_type)), new_arg(cst.Integer(index))]))
        self.report(string, "TNP002", f"torch.device({string.value})", fixes={call: fix})

    def _process_group(self, call: cst.Call, params: tuple[str, ...]) -> None:
        found = find_arg(call.args, "backend", params.index("backend"))
        if found is None:
            return
        i, arg = found
        value = arg.value
        nccl = self._is_nccl(value) or (
            isinstance(value, cst.IfExp) and self._is_nccl(value.body)
            and string_value(value.orelse) == "gloo" and self.proves_available(value.test))
        if not nccl:
            return
        for s in (value, getattr(value, "body", None), getattr(value, "orelse", None)):
            if s is not None:
                self.handled.add(id(s))
        self.report(arg, "TNP501", "backend=NCCL", writes_torch=False, fixes={
            call: lambda upd: upd.with_changes(args=remove_arg(upd.args, i, params))})

    def _is_nccl(self, node: cst.CSTNode) -> bool:
        value = string_value(node)
        if value is not None:
            return value.lower() in ("nccl", "cuda:nccl", "cpu:gloo,cuda:nccl")
        return (self.qname(node) or "").endswith("Backend.NCCL")

    def _ddp(self, call: cst.Call) -> None:
        for position, name in enumerate(rules.DDP_DEVICE_ARGS, start=1):
            found = find_arg(call.args, name, position)
            if found is None:
                continue
            value = found[1].value
            if (isinstance(value, cst.Name) and value.value == "None") or (
                    isinstance(value, cst.IfExp) and self.proves_available(value.test)):
                continue
            self.report(found[1], "TNP502", f"DDP `{name}`", fixes={value: lambda upd: cst.IfExp(
                test=expr(rules.AVAILABLE), body=parenthesize(upd)
                if isinstance(upd, (cst.IfExp, cst.Lambda)) else upd, orelse=expr("None"))})

    # ---- strings ------------------------------------------------------------------------------
    def _device_string(self, node: cst.SimpleString | cst.FormattedString, value: str) -> None:
        """'cuda' or 'cuda:N': find what the string is for, from the nearest real parent."""
        top, parent = node, self.parent(node)
        while (isinstance(parent, cst.IfExp) and top is not parent.test) or isinstance(
                parent, cst.BooleanOperation) or (  # "cuda:" + str(rank)
                isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Add)
                and top is parent.left and value.endswith(":")):
            top, parent = parent, self.parent(parent)
        if isinstance(parent, cst.ComparisonTarget) or (
                isinstance(parent, cst.Comparison) and top is parent.left) or self._in_comparison(
                parent):
            self.report(node, "TNP004", f"comparison with {_show(node)}")
            return
        code, accel_ok = "TNP008", False
        if isinstance(parent, cst.Arg):
            call = self.parent(parent)
            code, accel_ok = self._device_arg(call, parent)
        elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and top is parent.value:
            targets = ([t.target for t in parent.targets] if isinstance(parent, cst.Assign)
                       else [parent.target])
            if any(_device_like(_last_name(t)) for t in targets):
                code = "TNP002"
        elif isinstance(parent, cst.Param) and top is parent.default:
            code = "TNP002" if _device_like(parent.name.value) else "TNP008"
        elif isinstance(parent, cst.Element) and self._is_choices(parent):
            self.report(node, "TNP005", f"choices offer {_show(node)}")
            return
        if code == "TNP008":
            self.report(node, code, f"{_show(node)}")
            return
        self.report(node, code, f"device {_show(node)}",
                    fixes={node: self._string_fix(node, value, accel_ok)})

    def _device_arg(self, call: cst.CSTNode, arg: cst.Arg) -> tuple[str, bool]:
        """(code, whether None may stand for the device) for a device string passed as `arg`."""
        if not isinstance(call, cst.Call):
            return "TNP008", False
        name = keyword(arg)
        func = call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        q = self.qname(func)
        index = positional(call.args).index(arg) if arg.keyword is None else None
        if method == "add_argument" and name == "default":
            return "TNP005", False
        if method == "to" and q is None and (index == 0 or name == "device"):
            return "TNP002", True
        if name in rules.DEVICE_KEYWORDS or (name or "").endswith("_device"):
            torch_factory = (q or "").startswith("torch.") and q not in rules.DEVICE_FIRST_ARG
            return "TNP002", name == "device" and torch_factory and not q.startswith("torch.cuda")
        if index is not None and ((index == 0 and q in rules.DEVICE_FIRST_ARG)
                                  or rules.DEVICE_ARG_POSITION.get(q) == index):
            return "TNP002", False
        return "TNP008", False

    def _string_fix(self, node, value: str, accel_ok: bool) -> Fix:
        parent = self.parent(node)
        if isinstance(node, cst.FormattedString):
            dev_type = self.device_type(node, other_quote(node))

            def fix_f(upd: cst.FormattedString) -> cst.CSTNode:
                head, *rest = upd.parts
                tail = head.value[len("cuda"):]
                parts = [cst.FormattedStringExpression(expression=expr(dev_type))]
                parts += [head.with_changes(value=tail)] if tail else []
                return upd.with_changes(parts=[*parts, *rest])
            return fix_f
        if value == "cuda" and accel_ok:
            return lambda upd: expr(rules.ACCEL)
        dev_type = self.device_type(node, same_quote(node))
        suffix = value[len("cuda"):]
        if not suffix:
            return lambda upd: expr(dev_type)
        q = same_quote(node)
        return lambda upd: fit(expr(f"{dev_type} + {q}{suffix}{q}"), parent)

    def _in_comparison(self, node: cst.CSTNode | None) -> bool:
        """A tuple/list of strings on one side of a comparison: `t in ("cuda", "xpu")`."""
        while isinstance(node, (cst.Element, cst.Tuple, cst.List, cst.Set)):
            node = self.parent(node)
        return isinstance(node, (cst.ComparisonTarget, cst.Comparison))

    def _is_choices(self, element: cst.Element) -> bool:
        seq = self.parent(element)
        arg = self.parent(seq)
        call = self.parent(arg) if isinstance(arg, cst.Arg) else None
        return (isinstance(call, cst.Call) and keyword(arg) == "choices"
                and isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument")

    def _env_var(self, node: cst.SimpleString, value: str) -> None:
        if value in rules.ENV_VARS:
            self.report(node, rules.ENV_VARS[value], f"environment variable {value}")
        elif value.startswith(rules.NCCL_ENV_PREFIXES) and _env_name(value):
            self.report(node, "TNP602", f"environment variable {value}")
        elif value.startswith(rules.CUDA_ENV_PREFIXES) and _env_name(value):
            self.report(node, "TNP603", f"environment variable {value}")


class _IntOptions(cst.CSTVisitor):
    """argparse options declared `type=int`: `args.local_rank` is then an index."""

    def __init__(self, out: set[str]):
        super().__init__()
        self.out = out

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "add_argument"):
            return
        typ = find_arg(node.args, "type")
        if typ is None or not (isinstance(typ[1].value, cst.Name) and typ[1].value.value == "int"):
            return
        dest = find_arg(node.args, "dest")
        names = [string_value(a.value) or "" for a in positional(node.args)]
        if dest is not None and string_value(dest[1].value):
            self.out.add(string_value(dest[1].value))
        for n in names:
            if n.startswith("--"):
                self.out.add(n[2:].replace("-", "_"))
                break


def _guard_statement(upd: cst.SimpleStatementLine) -> cst.If:
    """`torch.accelerator.X()` raises where there is no accelerator, while `torch.cuda.X()` was a
    no-op there (or failed just the same): run it only when there is one."""
    return cst.If(test=expr(rules.AVAILABLE),
                  body=cst.SimpleStatementSuite(body=upd.body,
                                                trailing_whitespace=upd.trailing_whitespace),
                  leading_lines=upd.leading_lines)


def _only_call(stmt: cst.CSTNode) -> cst.Call | None:
    if (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.Call)):
        return stmt.body[0].value
    return None


def _last_name(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return ""


def _device_like(name: str) -> bool:
    name = name.lower()
    return "device" in name or name in ("dev", "accelerator")


def _env_name(value: str) -> bool:
    return re.fullmatch(r"[A-Z][A-Z0-9_]+", value) is not None


def _show(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)
