"""Tests of a device's type against 'cuda': `'cuda' in device`, `device.type == 'cuda'`,
`device.startswith('cuda')`, and the idiom built on them, `'cuda' if 'cuda' in device else 'cpu'`.
Real training code uses them to decide autocast, pinned memory and fused optimizers. Left as
they are, they are False on neuron once the device itself is ported, and the program silently
trains in float32; so each becomes a test of the device's own type, and the ones whose meaning
cannot be proven stay findings with a hint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from .cst_util import dotted_name, expr, parenthesize, positional, same_quote, string_value

if TYPE_CHECKING:
    from .findings import Reporter

# Where a comparison may replace a node without parentheses.
_COMPARISON_OK = (cst.Arg, cst.Assign, cst.AnnAssign, cst.Param, cst.Return, cst.Element,
                  cst.DictElement, cst.Expr, cst.If, cst.While, cst.IfExp, cst.Assert,
                  cst.BooleanOperation, cst.UnaryOperation)
_TYPE_NAMES = ("device_type", "dev_type")


@dataclass
class Test:
    """`node` asks whether `subject` is CUDA. kind "type": the subject is a device type ('cuda',
    'cpu'); "string": a device string whose type the test asks ('cuda:1' passes); "exact": a
    device string compared whole ('cuda:1' fails), whose meaning the tool cannot prove."""

    node: cst.BaseExpression
    subject: cst.BaseExpression
    kind: str
    negated: bool
    cuda: cst.SimpleString
    side: str  # where the subject is in the node: "left", "right" or "receiver" (of startswith)

    def subject_in(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """The subject in `node`, the test after the fixes inside it (same shape)."""
        if self.side == "left":
            return node.left
        if self.side == "right":
            return node.comparisons[0].comparator
        return node.func.value


def _is_cuda(node: cst.CSTNode) -> bool:
    return string_value(node) == "cuda"


def parse(sc: Reporter, node: cst.CSTNode) -> Test | None:
    """The test `node` makes, if it is one of the forms in the module docstring."""
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        target = node.comparisons[0]
        op, left, right = target.operator, node.left, target.comparator
        if isinstance(op, (cst.In, cst.NotIn)) and _is_cuda(left):
            kind = "type" if is_type(sc, right) else "string"
            return Test(node, right, kind, isinstance(op, cst.NotIn), left, "right")
        if isinstance(op, (cst.Equal, cst.NotEqual)) and (_is_cuda(left) or _is_cuda(right)):
            subject, cuda, side = ((right, left, "right") if _is_cuda(left)
                                   else (left, right, "left"))
            kind = "type" if is_type(sc, subject) else "exact"
            return Test(node, subject, kind, isinstance(op, cst.NotEqual), cuda, side)
    if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "startswith" and len(node.args) == 1
            and positional(node.args) and _is_cuda(node.args[0].value)):
        subject = node.func.value
        return Test(node, subject, "type" if is_type(sc, subject) else "string", False,
                    node.args[0].value, "receiver")
    return None


def is_type(sc: Reporter, node: cst.CSTNode) -> bool:
    """Provably a device type ('cuda', 'cpu'), never a device string with an index."""
    if isinstance(node, cst.Attribute) and node.attr.value == "type":
        return True  # device.type, tensor.device.type
    name = (dotted_name(node) or "").rsplit(".", 1)[-1]
    if name in _TYPE_NAMES or name.endswith("_device_type"):
        # a parameter so named is a type unless a call in this file passes something that
        # is not provably one (a device string, "cuda:0", would pass `!= "cpu"`)
        values = sc.facts.assigned_values(node) if isinstance(node, cst.Name) else None
        params = [v for v in values or () if isinstance(v, cst.Param)]
        return all(is_type(sc, a) for p in params for a in sc.facts.passed_to(p))
    if string_value(node) is not None:
        return ":" not in string_value(node)
    if isinstance(node, cst.IfExp):
        return is_type(sc, node.body) and is_type(sc, node.orelse)
    if isinstance(node, cst.Name):
        values = sc.facts.assigned_values(node)
        return bool(values) and all(isinstance(v, cst.BaseExpression) and v is not node
                                    and is_type(sc, v) for v in values)
    return False


def proves_accelerator(sc: Reporter, test: cst.CSTNode) -> bool:
    """A device-type test for CUDA the fix turns into "not the CPU": true only on an
    accelerator, so a guard under it would be a second guard of the same thing."""
    parsed = parse(sc, test)
    return parsed is not None and parsed.kind != "exact" and not parsed.negated


def device_type_of(test: Test, subject: cst.BaseExpression) -> cst.BaseExpression:
    """The device's own type: the subject itself, or `torch.device(subject).type`."""
    if test.kind == "type":
        return subject
    return cst.Attribute(value=cst.Call(func=expr("torch.device"),
                                        args=[cst.Arg(value=subject.with_changes(
                                            lpar=[], rpar=[]))]),
                         attr=cst.Name("type"))


def _is_cpu_test(test: Test, subject: cst.BaseExpression) -> cst.Comparison:
    """`<type> != "cpu"` (what "is CUDA" meant, where only CUDA and the CPU existed), or `==`
    for a negated test."""
    q = same_quote(test.cuda)
    subject = device_type_of(test, subject)
    if isinstance(subject, (cst.IfExp, cst.BooleanOperation, cst.Lambda, cst.Comparison,
                            cst.UnaryOperation, cst.BinaryOperation)):
        subject = parenthesize(subject)
    operator = cst.Equal() if test.negated else cst.NotEqual()
    return cst.Comparison(left=subject, comparisons=[cst.ComparisonTarget(
        operator=operator, comparator=cst.SimpleString(f"{q}cpu{q}"))])


def comparison(sc: Reporter, node: cst.SimpleString) -> None:
    """The string 'cuda' inside a comparison (or `startswith`): rewritten where the test is
    provably about the type, else a finding with a hint."""
    parent = sc.facts.parent(node)
    test = None
    for candidate in (parent, sc.facts.parent(parent)):  # Comparison(Target), or Call(Arg)
        test = parse(sc, candidate) if candidate is not None else None
        if test is not None:
            break
    shown = cst.Module([]).code_for_node(test.node if test else node)
    if test is None or test.kind == "exact":
        finding = sc.report(node, "TNP004", f"`{shown}`")
        if test is not None:
            sc.device_test(finding, test.node)
        return
    around = sc.facts.parent(test.node)

    def fix(upd: cst.CSTNode) -> cst.CSTNode:
        new = _is_cpu_test(test, test.subject_in(upd))
        return new if isinstance(around, _COMPARISON_OK) else parenthesize(new)

    finding = sc.report(node, "TNP004", f"`{shown}`", fixes={test.node: fix},
                        writes_torch=test.kind != "type")
    sc.device_test(finding, test.node)


def idiom(sc: Reporter, node: cst.IfExp) -> bool:
    """`'cuda' if <test of d> else 'cpu'`: the device type of d. True when handled (both
    strings reported, as a fix or a hint)."""
    if not (_is_cuda(node.body) and string_value(node.orelse) == "cpu"):
        return False
    test = parse(sc, node.test)
    if test is None or test.negated:
        return False
    for string in (node.body, test.cuda):
        sc.handled.add(id(string))
    shown = cst.Module([]).code_for_node(node)
    if test.kind == "exact":
        # The branch alone must not become the accelerator's type either: the test would still
        # be False on neuron, and the program would run there as on the CPU without a word.
        sc.report(node, "TNP004", f"`{shown}`")
        return True
    sc.report(node, "TNP004", f"`{shown}`", writes_torch=test.kind != "type", fixes={
        node: lambda upd: device_type_of(test, test.subject_in(upd.test))})
    return True
