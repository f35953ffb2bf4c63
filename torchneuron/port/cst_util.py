"""Small libcst helpers: names, string values, and argument lists that keep their formatting."""

from __future__ import annotations

import re

import libcst as cst

_CUDA_STRING = re.compile(r"cuda(:\d*)?")


def dotted_name(node: cst.CSTNode) -> str | None:
    """`torch.cuda.synchronize` for that Attribute chain; None for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        left = dotted_name(node.value)
        return None if left is None else f"{left}.{node.attr.value}"
    return None


def root_name(node: cst.CSTNode) -> cst.Name | None:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node if isinstance(node, cst.Name) else None


def expr(source: str) -> cst.BaseExpression:
    return cst.parse_expression(source)


def string_value(node: cst.CSTNode) -> str | None:
    """The text of a plain string literal (not bytes, not an f-string)."""
    if isinstance(node, cst.SimpleString) and "b" not in node.prefix.lower():
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - malformed escapes: not a string we can reason about
            return None
        return value if isinstance(value, str) else None
    return None


def cuda_device_string(value: str | None) -> bool:
    """'cuda', 'cuda:0', or 'cuda:' (the head of `"cuda:" + str(rank)`)."""
    return value is not None and _CUDA_STRING.fullmatch(value) is not None


def other_quote(node: cst.SimpleString | cst.FormattedString) -> str:
    quote = node.quote if isinstance(node, cst.SimpleString) else node.end
    return "'" if quote.startswith('"') else '"'


def same_quote(node: cst.SimpleString) -> str:
    return node.quote[0]


def parenthesize(node: cst.BaseExpression) -> cst.BaseExpression:
    if node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


# Parents under which a low-precedence expression (`a or b`, `a + b`) needs no parentheses.
_LOOSE_PARENTS = (cst.Arg, cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Param, cst.Return,
                  cst.Element, cst.DictElement, cst.Expr, cst.Decorator)


def fit(node: cst.BaseExpression, parent: cst.CSTNode | None) -> cst.BaseExpression:
    """Parenthesize an operator expression unless its new parent binds looser than it."""
    compound = isinstance(node, (cst.BooleanOperation, cst.BinaryOperation, cst.IfExp))
    if compound and not isinstance(parent, _LOOSE_PARENTS):
        return parenthesize(node)
    return node


def keyword(arg: cst.Arg) -> str | None:
    return arg.keyword.value if arg.keyword is not None else None


def positional(args: tuple[cst.Arg, ...] | list[cst.Arg]) -> list[cst.Arg]:
    return [a for a in args if a.keyword is None and not a.star]


def find_arg(args, name: str, position: int | None = None) -> tuple[int, cst.Arg] | None:
    """The argument bound to parameter `name` (by keyword, or at `position`)."""
    for i, a in enumerate(args):
        if keyword(a) == name:
            return i, a
    if position is not None:
        pos = [i for i, a in enumerate(args) if a.keyword is None and not a.star]
        if position < len(pos) and not any(a.star for a in args[:pos[position]]):
            return pos[position], args[pos[position]]
    return None


def new_arg(value: cst.BaseExpression, name: str | None = None) -> cst.Arg:
    if name is None:
        return cst.Arg(value=value)
    return cst.Arg(value=value, keyword=cst.Name(name),
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))


def as_keyword(arg: cst.Arg, name: str) -> cst.Arg:
    if arg.keyword is not None:
        return arg
    return arg.with_changes(keyword=cst.Name(name),
                            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                  whitespace_after=cst.SimpleWhitespace("")))


def as_positional(arg: cst.Arg) -> cst.Arg:
    return arg.with_changes(keyword=None, equal=cst.MaybeSentinel.DEFAULT)


def _multiline(ws: cst.BaseParenthesizableWhitespace) -> bool:
    return isinstance(ws, cst.ParenthesizedWhitespace)


def tidy_commas(args: list[cst.Arg]) -> list[cst.Arg]:
    """Give every argument but the last a comma; keep a trailing comma only in multi-line calls."""
    out = []
    for i, a in enumerate(args):
        last = i == len(args) - 1
        if not last and a.comma is cst.MaybeSentinel.DEFAULT:
            a = a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        elif last and isinstance(a.comma, cst.Comma) and not _multiline(a.comma.whitespace_after):
            a = a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        out.append(a)
    return out


def insert_first(args, arg: cst.Arg) -> list[cst.Arg]:
    """Prepend an argument, laid out like the first one already there."""
    args = list(args)
    if args and isinstance(args[0].comma, cst.Comma):
        arg = arg.with_changes(comma=cst.Comma(whitespace_after=args[0].comma.whitespace_after))
    return tidy_commas([arg, *args])


def remove_arg(args, index: int) -> list[cst.Arg]:
    """Drop the keyword argument args[index], keeping the layout of what is left."""
    args = list(args)
    removed = args.pop(index)
    if args and index == len(args):  # the removed one was last: its closing layout moves up
        prev = args[-1]
        args[-1] = prev.with_changes(comma=removed.comma,
                                     whitespace_after_arg=removed.whitespace_after_arg)
    return tidy_commas(args)
