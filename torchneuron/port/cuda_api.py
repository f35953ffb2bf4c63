"""The torch.cuda API: each reference is looked up in rules.CUDA_API and, where the table has a
target, rewritten to it (arguments adjusted to the target's signature, and guarded where the
target raises without an accelerator)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import rules
from .cst_util import (
    as_keyword,
    as_positional,
    dotted_name,
    expr,
    find_arg,
    fit,
    insert_first,
    keyword,
    new_arg,
    parenthesize,
    positional,
    tidy_commas,
)

if TYPE_CHECKING:
    from .findings import Fix, Reporter


def reference(sc: Reporter, node: cst.CSTNode, q: str, call: cst.Call | None) -> None:
    """`torch.cuda.<name>`, called (`call` is the Call) or not."""
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
        sc.report(node, code, shown)
        return
    if api.target is None:
        sc.report(node, api.code, shown)
    elif call is None:
        _bare_reference(sc, node, api, shown)
    else:
        fixes = _fix_api_call(sc, call, api)
        sc.report(node, api.code, shown, fixes=fixes)


def _bare_reference(sc: Reporter, node: cst.CSTNode, api: rules.Api, shown: str) -> None:
    parent = sc.facts.parent(node)
    target = api.target
    fixes = None
    if isinstance(parent, cst.Decorator) and api.kind == "custom_fwd":
        dev = sc.facts.device_type(node)
        fixes = {node: lambda upd: cst.Call(func=expr(target),
                                            args=[new_arg(expr(dev), "device_type")])}
    elif api.bare and not isinstance(parent, cst.AssignTarget):
        fixes = {node: lambda upd: expr(target)}
    sc.report(node, api.code, shown, fixes=fixes)


def _fix_api_call(sc: Reporter, call: cst.Call, api: rules.Api) -> dict[cst.CSTNode, Fix] | None:
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
        if api.guarded_only and not sc.facts.guarded(call):
            return None
        if api.absent is not None and not sc.facts.guarded(call):
            line = _alone_on_line(sc, call)
            if line is not None and api.absent == "None":
                fixes[line] = _guard_statement
            else:
                rename, parent, absent = fix, sc.facts.parent(call), api.absent
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
                sc.facts.is_index(found[1].value) or isinstance(found[1].value, cst.Name)
                and found[1].value.value == "None"):
            return None
        fixes[call] = lambda upd: upd.with_changes(
            func=target, args=[as_positional(upd.args[0]).with_changes(
                comma=cst.MaybeSentinel.DEFAULT)])
    elif kind == "seed":
        if len(args) != 1 or args[0].keyword is not None:
            return None
        seed = cst.Module([]).code_for_node(args[0].value)
        stmt = sc.facts.parent(sc.facts.parent(call))
        guard = _sole_statement_of_guard(sc, call)
        if _next_to_torch_seed(sc, stmt, seed):
            fixes.update(_removal(sc, call))
        elif guard is not None and _next_to_torch_seed(sc, guard, seed):
            # `if torch.cuda.is_available(): torch.cuda.manual_seed_all(s)` next to
            # `torch.manual_seed(s)`: the `if` goes, that call already seeds every device
            fixes[guard] = lambda upd: cst.RemovalSentinel.REMOVE
        else:
            # seeds the accelerator alone, as it seeded CUDA alone (the CPU's stream is left as
            # it was); torch.cuda's seeding is a no-op where CUDA is not, so it runs only
            # where an accelerator is
            method = expr(f"torch.get_device_module().{_seed_name(sc, call)}")
            rename = lambda upd: upd.with_changes(func=method)  # noqa: E731
            if sc.facts.guarded(call):
                fixes[call] = rename
            else:
                line = _alone_on_line(sc, call)
                if line is None:
                    return None
                fixes[call] = rename
                fixes[line] = _guard_statement
    elif kind == "autocast":
        # torch.cuda.amp.autocast() means float16 (torch.amp's default is the device's, bfloat16
        # on neuron, while the program's GradScaler is there for float16), and it is off where
        # CUDA is not: both are kept, so the program is the same one on every machine.
        if len(positional(args)) > len(rules.AUTOCAST_PARAMS):
            return None
        dev = sc.facts.device_type(call)
        gate = not sc.facts.guarded(call)

        def fix(upd: cst.Call) -> cst.Call:
            new_args = [as_keyword(a, rules.AUTOCAST_PARAMS[i]) if a.keyword is None else a
                        for i, a in enumerate(upd.args)]
            if find_arg(new_args, "dtype") is None:
                new_args.append(new_arg(expr("torch.float16"), "dtype"))
            new_args = only_with_accelerator(new_args) if gate else new_args
            return upd.with_changes(func=target, args=insert_first(
                new_args, new_arg(expr(dev), "device_type")))
        fixes[call] = fix
    elif kind == "grad_scaler":
        # torch.cuda.amp.GradScaler disables itself where CUDA is not; torch.amp's on the CPU
        # does not
        dev = sc.facts.device_type(call)
        if len(positional(args)) > len(rules.GRAD_SCALER_PARAMS):
            return None
        gate = not sc.facts.guarded(call)

        def fix(upd: cst.Call) -> cst.Call:
            new_args = [as_keyword(a, rules.GRAD_SCALER_PARAMS[i]) if a.keyword is None else a
                        for i, a in enumerate(upd.args)]
            new_args = only_with_accelerator(new_args) if gate else new_args
            return upd.with_changes(func=target, args=insert_first(new_args, new_arg(expr(dev))))
        fixes[call] = fix
    elif kind == "custom_fwd":
        dev = sc.facts.device_type(call)
        fixes[call] = lambda upd: upd.with_changes(
            func=target, args=tidy_commas([*upd.args, new_arg(expr(dev), "device_type")]))
    return fixes


def only_with_accelerator(args: list[cst.Arg]) -> list[cst.Arg]:
    """`enabled=` (or `enabled=<e>`) becomes `enabled=<e> and torch.accelerator.is_available()`."""
    found = find_arg(args, "enabled")
    if found is None:
        return tidy_commas([*args, new_arg(expr(rules.AVAILABLE), "enabled")])
    i, arg = found
    value = arg.value
    if isinstance(value, cst.Name) and value.value == "True":
        return [*args[:i], arg.with_changes(value=expr(rules.AVAILABLE)), *args[i + 1:]]
    if isinstance(value, (cst.BooleanOperation, cst.IfExp, cst.Lambda, cst.NamedExpr)):
        value = parenthesize(value)
    args = list(args)
    args[i] = arg.with_changes(value=cst.BooleanOperation(
        left=value, operator=cst.And(), right=expr(rules.AVAILABLE)))
    return args


def _alone_on_line(sc: Reporter, call: cst.Call) -> cst.SimpleStatementLine | None:
    stmt = sc.facts.parent(call)
    line = sc.facts.parent(stmt) if isinstance(stmt, cst.Expr) else None
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        return line
    return None


def _next_to_torch_seed(sc: Reporter, stmt: cst.CSTNode, seed: str) -> bool:
    """The statement `stmt` (a `torch.cuda.manual_seed_all(s)`, or the `if` around it) is next
    to `torch.manual_seed(s)` (only other seeding in between): `torch.manual_seed(s)` already
    seeds every device, so dropping it changes no RNG state."""
    block = sc.facts.parent(stmt)
    if block is None or not hasattr(block, "body") or not isinstance(block.body, (list, tuple)):
        return False
    body = list(block.body)
    if stmt not in body:
        return False
    at = body.index(stmt)
    for direction in (-1, 1):
        i = at + direction
        while 0 <= i < len(body):
            c = _only_call(body[i])
            if c is None:
                c = _only_call(_sole_body(sc, body[i]))
                if c is None or not (sc.facts.qname(c.func) or "").startswith("torch.cuda.manual"):
                    break
            if (sc.facts.qname(c.func) == "torch.manual_seed" and len(c.args) == 1
                    and cst.Module([]).code_for_node(c.args[0].value) == seed):
                return True
            if "seed" not in (dotted_name(c.func) or ""):
                break
            i += direction
    return False


def _sole_body(sc: Reporter, stmt: cst.CSTNode) -> cst.CSTNode | None:
    """The one statement of an availability guard `if torch.cuda.is_available(): <stmt>`."""
    if not (isinstance(stmt, cst.If) and stmt.orelse is None
            and sc.facts.proves_available(stmt.test)):
        return None
    body = stmt.body.body
    if len(body) != 1:
        return None
    only = body[0]
    if isinstance(stmt.body, cst.SimpleStatementSuite):  # `if ...: call()` on one line
        return cst.SimpleStatementLine(body=[only])
    return only


def _sole_statement_of_guard(sc: Reporter, call: cst.Call) -> cst.If | None:
    """The availability guard whose whole body is the statement `call` makes, with no comment
    to lose."""
    small = sc.facts.parent(call)
    container = sc.facts.parent(small)
    if isinstance(container, cst.SimpleStatementSuite):  # `if ...: call()` on one line
        suite, line = container, None
    else:
        suite, line = sc.facts.parent(container), container
    guard = sc.facts.parent(suite) if suite is not None else None
    if not isinstance(guard, cst.If) or guard.body is not suite or guard.orelse is not None:
        return None
    if len(suite.body) != 1 or not sc.facts.proves_available(guard.test):
        return None
    if len(getattr(container, "body", ())) != 1:
        return None
    comments = list(guard.leading_lines) + (list(line.leading_lines) if line else [])
    if any(e.comment is not None for e in comments):
        return None
    return guard


def _seed_name(sc: Reporter, call: cst.Call) -> str:
    return (sc.facts.qname(call.func) or "torch.cuda.manual_seed").rsplit(".", 1)[-1]


def _removal(sc: Reporter, call: cst.Call) -> dict[cst.CSTNode, Fix]:
    """Fixes that drop the statement `call` makes, alone on its line or not. Comment lines above
    it move down to the next statement (or to the end of the block), so no comment is lost."""
    stmt = sc.facts.parent(call)
    line = sc.facts.parent(stmt)
    if len(line.body) > 1:
        return {stmt: lambda upd: cst.RemovalSentinel.REMOVE}
    fixes: dict[cst.CSTNode, Fix] = {line: lambda upd: cst.RemovalSentinel.REMOVE}
    comments = list(line.leading_lines)
    if not any(empty.comment is not None for empty in comments):
        return fixes
    block = sc.facts.parent(line)
    body = list(block.body)
    after = next((s for s in body[body.index(line) + 1:] if not _redundant_seed(sc, s)), None)
    if after is not None:
        fixes[after] = lambda upd: upd.with_changes(
            leading_lines=[*comments, *upd.leading_lines])
    elif hasattr(block, "footer"):
        fixes[block] = lambda upd: upd.with_changes(footer=[*comments, *upd.footer])
    else:
        return {}  # a block without a footer to keep them in: leave the line
    return fixes


def _redundant_seed(sc: Reporter, stmt: cst.CSTNode) -> bool:
    c = _only_call(stmt)
    return c is not None and (sc.facts.qname(c.func) or "").startswith("torch.cuda.manual_seed")


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


