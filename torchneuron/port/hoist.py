"""The last step of a rewrite: the fixes name the accelerator with placeholders (rules.ACCEL and
rules.device_expr()), and this writes them out. Used once, a placeholder becomes the expression
itself. Used more than once, it becomes a name bound once by
`accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")`: at the top of the
function when all the uses are in one function, else after the module's imports. The accelerator
of a process never changes, so computing it once is the same program, and `accelerator.type`
reads better than `(torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")).type`."""

from __future__ import annotations

import collections

import libcst as cst

from . import rules
from .cst_util import dotted_name, expr, fit

_Scope = int | None  # id() of a FunctionDef; None: the module's top-level code (class bodies too)


class _Walk:
    """A node stack that says which function body a node is in: decorators, defaults and
    annotations of a def run in the scope around it."""

    def __init__(self):
        self.stack: list[cst.CSTNode] = []

    def scope(self) -> _Scope:
        for i in range(len(self.stack) - 1, 0, -1):
            parent = self.stack[i - 1]
            if isinstance(parent, cst.FunctionDef) and self.stack[i] is parent.body:
                return id(parent)
        return None

    def in_fstring(self) -> bool:
        return any(isinstance(n, cst.FormattedString) for n in self.stack)


class _Count(cst.CSTVisitor):
    def __init__(self):
        super().__init__()
        self.walk = _Walk()
        self.uses: collections.Counter[_Scope] = collections.Counter()
        self.quotes: dict[_Scope, str] = {}  # the quote of the first "cpu" outside an f-string
        self.names: set[str] = set()
        self.blocks: set[_Scope] = set()  # functions whose body is an indented block
        self.first_top_level: int | None = None  # the first top-level statement that uses one

    def on_visit(self, node: cst.CSTNode) -> bool:
        stack = self.walk.stack
        stack.append(node)
        if isinstance(node, cst.FunctionDef) and isinstance(node.body, cst.IndentedBlock):
            self.blocks.add(id(node))
        if isinstance(node, cst.Name):
            parent = stack[-2] if len(stack) > 1 else None
            if not (isinstance(parent, cst.Attribute) and parent.attr is node):  # x.accelerator
                self.names.add(node.value)
            if node.value in rules.PLACEHOLDERS:
                scope = self.walk.scope()
                self.uses[scope] += 1
                quote = rules.PLACEHOLDERS[node.value]
                if quote is not None and not self.walk.in_fstring():
                    self.quotes.setdefault(scope, quote)
                if scope is None and self.first_top_level is None:
                    self.first_top_level = stack[0].body.index(stack[1])
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.walk.stack.pop()


class _Write(cst.CSTTransformer):
    def __init__(self, count: _Count):
        super().__init__()
        self.walk = _Walk()
        self.count = count
        self.name = next((n for n in rules.HOIST_NAMES if n not in count.names), None)
        hoisting = self.name is not None and sum(count.uses.values()) > 1
        (only, *others) = count.uses
        self.hoisted = {only} if hoisting and not others and only in count.blocks else set()
        self.module_hoists = hoisting and not self.hoisted

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.walk.stack.append(node)
        return True

    def on_leave(self, original_node, updated_node):
        self.walk.stack.pop()
        if isinstance(original_node, cst.Name) and original_node.value in rules.PLACEHOLDERS:
            return self._placeholder(original_node)
        if isinstance(original_node, cst.FunctionDef) and id(original_node) in self.hoisted:
            body = updated_node.body
            return updated_node.with_changes(body=body.with_changes(
                body=_insert_at_top(list(body.body), self._line(id(original_node)))))
        if isinstance(original_node, cst.Module) and self.module_hoists:
            return updated_node.with_changes(body=_insert_after_imports(
                list(updated_node.body), self.count.first_top_level, self._line(None)))
        return updated_node

    def _placeholder(self, node: cst.Name) -> cst.BaseExpression:
        scope = self.walk.scope()
        if self.module_hoists or scope in self.hoisted:
            return cst.Name(self.name)
        quote = rules.PLACEHOLDERS[node.value]
        if quote is None:
            return expr(rules.ACCEL_TEXT)
        return fit(expr(rules.device_text(quote)), self.walk.stack[-1] if self.walk.stack else None)

    def _line(self, scope: _Scope) -> cst.SimpleStatementLine:
        text = rules.device_text(self.count.quotes.get(scope, '"'))
        return cst.parse_statement(f"{self.name} = {text}\n")


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _insert_at_top(body: list, line: cst.SimpleStatementLine) -> list:
    at = 1 if body and _is_docstring(body[0]) else 0
    return [*body[:at], line, *body[at:]]


def _is_import(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)


def _imports_torch(stmt: cst.CSTNode) -> bool:
    return _is_import(stmt) and any(
        isinstance(s, cst.Import) and any(a.asname is None and dotted_name(a.name) == "torch"
                                          for a in s.names) for s in stmt.body)


def _insert_after_imports(body: list, first_use: int | None,
                          line: cst.SimpleStatementLine) -> list:
    """After the imports that come before the first top-level use (or, when only functions use
    it, before the first def, class or other block), and never before `import torch`."""
    if first_use is None:
        first_use = next((i for i, s in enumerate(body)
                          if not isinstance(s, cst.SimpleStatementLine)), len(body))
    after = [i for i in range(first_use) if _is_import(body[i])]
    after += [i for i, s in enumerate(body) if _imports_torch(s)][:1]
    at = max(after) + 1 if after else first_use
    return [*body[:at], line, *body[at:]]


def write_accelerator(module: cst.Module) -> cst.Module:
    """The module with every placeholder written out (see the module docstring)."""
    count = _Count()
    module.visit(count)
    if not count.uses:
        return module
    return module.visit(_Write(count))
