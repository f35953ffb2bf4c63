"""What the code around a node proves, from libcst's metadata: what a name refers to through
the imports, whether an accelerator is known to be available at that point, and whether a value
is provably an integer (so a device index). The scanner asks; nothing here reports or rewrites."""

from __future__ import annotations

from typing import Callable

import libcst as cst
from libcst.metadata import (
    ParentNodeProvider,
    QualifiedNameProvider,
    QualifiedNameSource,
    ScopeProvider,
)

from . import rules
from .cst_util import dotted_name, find_arg, positional, root_name, string_value


class Facts(cst.MetadataDependent):
    """Use inside `with facts.resolve(wrapper):`, where the metadata is available."""

    METADATA_DEPENDENCIES = (ParentNodeProvider, QualifiedNameProvider, ScopeProvider)

    def __init__(self, module: cst.Module):
        super().__init__()
        self.int_options: set[str] = set()  # argparse dests declared with type=int
        module.visit(_IntOptions(self.int_options))
        self._int_attributes: dict[tuple[int, str], bool] = {}  # (class id, name) -> proven
        self._module = module
        # a device-type test that proves an accelerator (conditions.proves_accelerator); set by
        # the engine, since conditions reads these facts
        self.accelerator_test: Callable[[cst.CSTNode], bool] | None = None

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

    def assigned_values(self, name: cst.Name) -> list[cst.CSTNode] | None:
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

    def passed_to(self, param: cst.Param) -> list[cst.BaseExpression]:
        """What the calls of the function in this module pass as `param` (by name or position;
        a call through an attribute is taken for a method call, `self` not passed)."""
        func = self.parent(self.parent(param))
        if not isinstance(func, cst.FunctionDef):
            return []
        params = list(func.params.params)
        position = params.index(param) if param in params else None
        name = func.name.value
        found: list[cst.BaseExpression] = []

        class _Calls(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                f = node.func
                if isinstance(f, cst.Name) and f.value == name:
                    at = position
                elif isinstance(f, cst.Attribute) and f.attr.value == name:
                    at = position - 1 if position else None
                else:
                    return
                arg = find_arg(node.args, param.name.value, at)
                if arg is not None:
                    found.append(arg[1].value)

        self._module.visit(_Calls())
        return found

    def proves_available(self, test: cst.CSTNode) -> bool:
        """True when `test` being true means an accelerator is available: an availability or
        device-count query, or a device-type test for CUDA the fix turns into "not the CPU"
        (a guard under it would be a second guard of the same thing)."""
        if self.accelerator_test is not None and self.accelerator_test(test):
            return True
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
            values = self.assigned_values(test)
            return bool(values) and all(isinstance(v, cst.BaseExpression)
                                        and self.proves_available(v) for v in values)
        return False

    def proves_absent(self, test: cst.CSTNode) -> bool:
        return (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
                and self.proves_available(test.expression))

    def guarded(self, node: cst.CSTNode) -> bool:
        """Inside code that only runs when an accelerator is available."""
        child, parent = node, self.parent(node)
        while parent is not None:
            if isinstance(parent, (cst.IfExp, cst.If)):
                if child is parent.body and self.proves_available(parent.test):
                    return True
                if child is parent.orelse and self.proves_absent(parent.test):
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
            if node.attr.value in self.int_options and self.qname(node) is None:
                return True
            return self._int_attribute(node)
        if isinstance(node, cst.Name):
            values = self.assigned_values(node)
            return bool(values) and all(self.binds_int(v) for v in values)
        return False

    def _int_attribute(self, node: cst.Attribute) -> bool:
        """`self.gpu_id` in a method, where every `self.gpu_id = ...` of the class binds an int
        (`self.gpu_id = gpu_id` from a parameter `gpu_id: int`, or `int(os.environ[...])`)."""
        found = _method_of(self, node)
        if found is None or node.value.value != found[1]:
            return False
        key = (id(found[0]), node.attr.value)
        if key not in self._int_attributes:
            self._int_attributes[key] = False  # while deciding: a cycle proves nothing
            values = _attribute_values(self, found[0], node.attr.value)
            self._int_attributes[key] = bool(values) and all(self.binds_int(v) for v in values)
        return self._int_attributes[key]

    def binds_int(self, value: cst.CSTNode) -> bool:
        if isinstance(value, cst.Param):
            ann = value.annotation
            return ann is not None and isinstance(ann.annotation, cst.Name) \
                and ann.annotation.value == "int"
        if isinstance(value, cst.For):
            it = value.iter
            return isinstance(it, cst.Call) and self.qname(it.func) == "builtins.range"
        return self.is_index(value)

    def device_type(self, node: cst.CSTNode, quote: str | None = None) -> str:
        """The accelerator's type, as an expression to write at `node`."""
        if self.guarded(node):
            return rules.GUARDED_TYPE
        return rules.device_type_expr(quote or self._free_quote(node))

    def _free_quote(self, node: cst.CSTNode) -> str:
        """A quote that may appear at `node`: inside an f-string, not the f-string's own
        (before Python 3.12)."""
        parent = self.parent(node)
        while parent is not None:
            if isinstance(parent, cst.FormattedString):
                return "'" if parent.start.endswith('"') else '"'
            parent = self.parent(parent)
        return '"'


def _method_of(facts: Facts, node: cst.CSTNode) -> tuple[cst.ClassDef, str] | None:
    """(the class, the name of `self`) of the method `node` is in."""
    func = facts.parent(node)
    while func is not None and not isinstance(func, cst.FunctionDef):
        func = facts.parent(func)
    cls = facts.parent(facts.parent(func)) if func is not None else None
    if not isinstance(cls, cst.ClassDef) or not func.params.params:
        return None
    return cls, func.params.params[0].name.value


def _attribute_values(facts: Facts, cls: cst.ClassDef, attr: str) -> list[cst.CSTNode] | None:
    """Every value a method of `cls` assigns to `self.<attr>`; None if one is not a plain
    assignment (augmented, unpacked, ...)."""
    values: list[cst.CSTNode] = []
    for stmt in cls.body.body:
        if not (isinstance(stmt, cst.FunctionDef) and stmt.params.params):
            continue
        me = stmt.params.params[0].name.value
        for target, value in _self_assignments(stmt, me, attr):
            if value is None:
                return None
            values.append(value)
    return values


def _self_assignments(func: cst.FunctionDef, me: str, attr: str):
    """(target, value or None) for each binding of `me.<attr>` in `func`."""
    found = []

    class _Find(cst.CSTVisitor):
        def _is_target(self, node) -> bool:
            return (isinstance(node, cst.Attribute) and node.attr.value == attr
                    and isinstance(node.value, cst.Name) and node.value.value == me)

        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if self._is_target(t.target):
                    found.append((t.target, node.value))
                elif isinstance(t.target, (cst.Tuple, cst.List)) and any(
                        self._is_target(e.value) for e in t.target.elements):
                    found.append((t.target, None))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if self._is_target(node.target):
                found.append((node.target, node.value))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if self._is_target(node.target):
                found.append((node.target, None))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is func  # a nested def's `self` is another name

    func.visit(_Find())
    return found


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


