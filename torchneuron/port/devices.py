"""Device and backend arguments: `.cuda()`, the string 'cuda' wherever it names a device,
`torch.device("cuda")`, NCCL as the process-group backend, and DDP's CUDA-only `device_ids`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import conditions, cuda_api, rules
from .cst_util import (
    cuda_device_string,
    expr,
    find_arg,
    fit,
    keyword,
    new_arg,
    other_quote,
    parenthesize,
    positional,
    remove_arg,
    same_quote,
    string_value,
    tidy_commas,
)

if TYPE_CHECKING:
    from .findings import Fix, Reporter


def dot_cuda(sc: Reporter, call: cst.Call) -> None:
    found = find_arg(call.args, "device", 0)
    rest = [a for a in call.args if found is None or a is not found[1]]
    if any(a.star for a in call.args) or any(keyword(a) not in (
            "non_blocking", "memory_format") for a in rest):
        sc.report(call.func.attr, "TNP001")
        return
    value = found[1].value if found else None
    if _in_map_location(sc, call):  # a storage: its .to() takes no positional device
        sc.report(call.func.attr, "TNP001", "`.cuda()` in `map_location`")
        return
    if value is None or (isinstance(value, cst.Name) and value.value == "None"):
        device = rules.ACCEL
    elif sc.facts.is_index(value):
        device = None  # built from the rewritten index below
    else:
        sc.report(call.func.attr, "TNP001")
        return
    dev_type = sc.facts.device_type(call)

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
    sc.report(call.func.attr, "TNP001", fixes={call: fix})


def pin_memory_device(sc: Reporter, call: cst.Call) -> None:
    """DataLoader pins for the current accelerator; the argument is deprecated and ignored."""
    for i, arg in enumerate(call.args):
        if keyword(arg) == "pin_memory_device" and cuda_device_string(string_value(arg.value)):
            sc.handled.add(id(arg.value))
            sc.report(arg, "TNP007", writes_torch=False, fixes={
                call: lambda upd, i=i: upd.with_changes(args=remove_arg(upd.args, i))})


def integer_device(sc: Reporter, call: cst.Call) -> None:
    """`.to(rank)`, `torch.zeros(3, device=rank)`: an integer device means the current
    accelerator, and fails where there is none; with the accelerator's type it runs anywhere."""
    func = call.func
    q = sc.facts.qname(func)
    if isinstance(func, cst.Attribute) and func.attr.value == "to" and q is None:
        found = find_arg(call.args, "device", 0)
    elif (q or "").startswith("torch.") and not (q in rules.DEVICE_FIRST_ARG or q.startswith(
            rules.DEVICE_MODULES) or q.startswith("torch.get_device_module")):
        found = find_arg(call.args, "device")
    else:
        return
    if found is None or any(a.star for a in call.args) or not sc.facts.is_index(found[1].value):
        return
    arg = found[1]
    dev_type = sc.facts.device_type(call)
    sc.report(arg.value, "TNP009", f"integer device `{_show(arg.value)}`", fixes={
        arg.value: lambda upd: cst.Call(func=expr("torch.device"), args=tidy_commas(
            [new_arg(expr(dev_type)), new_arg(upd)]))})


def _in_map_location(sc: Reporter, node: cst.CSTNode) -> bool:
    parent = sc.facts.parent(node)
    while parent is not None and not isinstance(parent, cst.Lambda):
        parent = sc.facts.parent(parent)
    arg = sc.facts.parent(parent) if parent is not None else None
    return isinstance(arg, cst.Arg) and keyword(arg) == "map_location"


def torch_device(sc: Reporter, call: cst.Call) -> None:
    if len(call.args) != 1 or call.args[0].keyword is not None:
        return
    string = call.args[0].value
    value = string_value(string)
    if not cuda_device_string(value) or value == "cuda:":
        return
    sc.handled.add(id(string))
    guarded = sc.facts.guarded(call)
    quote = same_quote(string)
    parent = sc.facts.parent(call)
    if value == "cuda":
        new = expr(rules.ACCEL if guarded else rules.device_expr(quote))
        fix = lambda upd: fit(new, parent)  # noqa: E731
    else:
        dev_type = sc.facts.device_type(call, quote)
        index = value.split(":")[1]
        fix = lambda upd: upd.with_changes(args=tidy_commas(  # noqa: E731
            [new_arg(expr(dev_type)), new_arg(cst.Integer(index))]))
    sc.report(string, "TNP002", f"torch.device({string.value})", fixes={call: fix})


def process_group(sc: Reporter, call: cst.Call, params: tuple[str, ...]) -> None:
    """backend="nccl" becomes the device's default backend, the one CUDA's default is NCCL:
    the same process group on CUDA (and `dist.get_backend()` still says "nccl" there)."""
    found = find_arg(call.args, "backend", params.index("backend"))
    if found is None:
        return
    arg, value = found[1], found[1].value
    nccl = _is_nccl(sc, value) or (
        isinstance(value, cst.IfExp) and _is_nccl(sc, value.body)
        and string_value(value.orelse) == "gloo" and sc.facts.proves_available(value.test))
    if not nccl:
        return
    for s in (value, getattr(value, "body", None), getattr(value, "orelse", None)):
        if s is not None:
            sc.handled.add(id(s))
    func = call.func
    module = _show(func.value) if isinstance(func, cst.Attribute) else "torch.distributed"
    device = rules.ACCEL if sc.facts.guarded(call) else rules.device_expr()
    default = expr(f"{module}.get_default_backend_for_device({device})")
    sc.report(arg, "TNP501", "backend=NCCL", fixes={value: lambda upd: default})


def nccl_option_default(sc: Reporter, node: cst.SimpleString) -> bool:
    """`add_argument("--backend", default="nccl")`: the default becomes the accelerator's own
    backend (NCCL on CUDA, gloo without an accelerator), so the program runs by default on
    every machine; a value given on the command line is used as before. True when handled."""
    arg = sc.facts.parent(node)
    call = sc.facts.parent(arg) if isinstance(arg, cst.Arg) else None
    if not (isinstance(call, cst.Call) and keyword(arg) == "default"
            and isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument"):
        return False
    device = rules.ACCEL if sc.facts.guarded(call) else rules.device_expr(same_quote(node))
    default = expr(f"torch.distributed.get_default_backend_for_device({device})")
    sc.report(node, "TNP501", f"option default {node.value}", fixes={node: lambda upd: default})
    return True


def _is_nccl(sc: Reporter, node: cst.CSTNode) -> bool:
    value = string_value(node)
    if value is not None:
        return value.lower() == "nccl"
    return (sc.facts.qname(node) or "").endswith("Backend.NCCL")


def ddp(sc: Reporter, call: cst.Call) -> None:
    for position, name in enumerate(rules.DDP_DEVICE_ARGS, start=1):
        found = find_arg(call.args, name, position)
        if found is None:
            continue
        value = found[1].value
        if (isinstance(value, cst.Name) and value.value == "None") or (
                isinstance(value, cst.IfExp) and sc.facts.proves_available(value.test)):
            continue
        sc.report(found[1], "TNP502", f"DDP `{name}`", fixes={value: lambda upd: cst.IfExp(
            test=expr(rules.AVAILABLE), body=parenthesize(upd)
            if isinstance(upd, (cst.IfExp, cst.Lambda)) else upd, orelse=expr("None"))})

# ---- strings ------------------------------------------------------------------------------
def device_string(sc: Reporter, node: cst.SimpleString | cst.FormattedString, value: str) -> None:
    """'cuda' or 'cuda:N': find what the string is for, from the nearest real parent."""
    top, parent = node, sc.facts.parent(node)
    while (isinstance(parent, cst.IfExp) and top is not parent.test) or isinstance(
            parent, cst.BooleanOperation) or (  # "cuda:" + str(rank)
            isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Add)
            and top is parent.left and value.endswith(":")):
        top, parent = parent, sc.facts.parent(parent)
    if isinstance(parent, cst.ComparisonTarget) or (
            isinstance(parent, cst.Comparison) and top is parent.left) or _in_comparison(
            sc, parent) or (top is node and conditions.parse(sc, sc.facts.parent(parent))):
        conditions.comparison(sc, node)
        return
    code, accel_ok = "TNP008", False
    if isinstance(parent, cst.Arg):
        call = sc.facts.parent(parent)
        code, accel_ok = _device_arg(sc, call, parent)
    elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and top is parent.value:
        targets = ([t.target for t in parent.targets] if isinstance(parent, cst.Assign)
                   else [parent.target])
        if any(_device_like(_last_name(t)) for t in targets):
            code = "TNP002"
    elif isinstance(parent, cst.Param) and top is parent.default:
        code = "TNP002" if _device_like(parent.name.value) else "TNP008"
    elif isinstance(parent, cst.Element) and _is_choices(sc, parent):
        sc.report(node, "TNP005", f"choices offer {_show(node)}")
        return
    if code == "TNP008" and ":" in value:
        _held_device(sc, node, top, value)
        return
    if code == "TNP008":
        sc.report(node, code, f"{_show(node)}")
        return
    fixes = {node: _string_fix(sc, node, value, accel_ok)}
    if isinstance(parent, cst.Arg):
        fixes.update(_amp_off_without_accelerator(sc, sc.facts.parent(parent), value))
    sc.report(node, code, f"device {_show(node)}", fixes=fixes)


def _amp_off_without_accelerator(sc: Reporter, call: cst.CSTNode, value: str) -> dict:
    """`torch.autocast("cuda")` / `torch.amp.GradScaler("cuda")` are off where CUDA is not;
    given the accelerator's type they would turn on for the CPU there. So they are gated as
    `torch.cuda.amp`'s are (cuda_api.only_with_accelerator), unless the code already tests for
    an accelerator or passes `enabled` by position."""
    q = sc.facts.qname(call.func) if isinstance(call, cst.Call) else None
    params = rules.AMP_DEVICE_FUNCS.get(q)
    if params is None or value != "cuda" or sc.facts.guarded(call) or any(
            a.star for a in call.args) or len(positional(call.args)) > params.index("enabled"):
        return {}
    return {call: lambda upd: upd.with_changes(
        args=cuda_api.only_with_accelerator(list(upd.args)))}


def _held_device(sc: Reporter, node, top: cst.CSTNode, value: str) -> None:
    """'cuda:0', f"cuda:{rank}", "cuda:" + str(rank) built where no call takes it: a device
    wherever it is (held in a variable, it reaches `.to()` or `torch.load(map_location=...)`
    later). Without an accelerator it becomes plain "cpu", the one spelling every API takes
    (`torch.load` refuses "cpu:0")."""
    inner = _string_fix(sc, node, value, False, guarded=True)
    parent = sc.facts.parent(top)
    q = node.end[0] if isinstance(node, cst.FormattedString) else same_quote(node)
    if sc.facts.guarded(node):
        fixes = {node: inner}
    else:
        def or_cpu(upd: cst.BaseExpression) -> cst.BaseExpression:
            return fit(cst.IfExp(test=expr(rules.AVAILABLE), body=upd,
                                 orelse=cst.SimpleString(f"{q}cpu{q}")), parent)
        fixes = ({node: lambda upd: or_cpu(inner(upd))} if top is node
                 else {node: inner, top: or_cpu})
    sc.report(node, "TNP002", f"device {_show(node)}", fixes=fixes)


def _device_arg(sc: Reporter, call: cst.CSTNode, arg: cst.Arg) -> tuple[str, bool]:
    """(code, whether None may stand for the device) for a device string passed as `arg`."""
    if not isinstance(call, cst.Call):
        return "TNP008", False
    name = keyword(arg)
    func = call.func
    method = func.attr.value if isinstance(func, cst.Attribute) else None
    q = sc.facts.qname(func)
    index = positional(call.args).index(arg) if arg.keyword is None else None
    if method == "add_argument" and name == "default":
        return "TNP005", False
    if method == "to" and q is None and (index == 0 or name == "device"):
        return "TNP002", True
    if name in rules.DEVICE_KEYWORDS or (name or "").endswith("_device"):
        torch_factory = (q or "").startswith("torch.") and q not in rules.DEVICE_FIRST_ARG
        return "TNP002", name == "device" and torch_factory and not q.startswith("torch.cuda")
    device_first = q in rules.DEVICE_FIRST_ARG or (q or "").startswith(rules.DEVICE_MODULES)
    if index is not None and ((index == 0 and device_first)
                              or rules.DEVICE_ARG_POSITION.get(q) == index):
        return "TNP002", False
    return "TNP008", False


def _string_fix(sc: Reporter, node, value: str, accel_ok: bool,
                guarded: bool = False) -> Fix:
    """`guarded`: the result is used only where an accelerator is available."""
    parent = sc.facts.parent(node)
    if isinstance(node, cst.FormattedString):
        dev_type = (rules.GUARDED_TYPE if guarded
                    else sc.facts.device_type(node, other_quote(node)))

        def fix_f(upd: cst.FormattedString) -> cst.CSTNode:
            head, *rest = upd.parts
            tail = head.value[len("cuda"):]
            parts = [cst.FormattedStringExpression(expression=expr(dev_type))]
            parts += [head.with_changes(value=tail)] if tail else []
            return upd.with_changes(parts=[*parts, *rest])
        return fix_f
    if value == "cuda" and accel_ok:
        return lambda upd: expr(rules.ACCEL)
    dev_type = rules.GUARDED_TYPE if guarded else sc.facts.device_type(node, same_quote(node))
    suffix = value[len("cuda"):]
    if not suffix:
        return lambda upd: expr(dev_type)
    q = same_quote(node)
    return lambda upd: fit(expr(f"{dev_type} + {q}{suffix}{q}"), parent)


def _in_comparison(sc: Reporter, node: cst.CSTNode | None) -> bool:
    """A tuple/list of strings on one side of a comparison: `t in ("cuda", "xpu")`."""
    while isinstance(node, (cst.Element, cst.Tuple, cst.List, cst.Set)):
        node = sc.facts.parent(node)
    return isinstance(node, (cst.ComparisonTarget, cst.Comparison))


def _is_choices(sc: Reporter, element: cst.Element) -> bool:
    seq = sc.facts.parent(element)
    arg = sc.facts.parent(seq)
    call = sc.facts.parent(arg) if isinstance(arg, cst.Arg) else None
    return (isinstance(call, cst.Call) and keyword(arg) == "choices"
            and isinstance(call.func, cst.Attribute) and call.func.attr.value == "add_argument")


def _last_name(node: cst.CSTNode) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return ""


def _device_like(name: str) -> bool:
    name = name.lower()
    return "device" in name or name in ("dev", "accelerator")


def _show(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)
