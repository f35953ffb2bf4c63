"""Is this Python at all? Python's own parser answers first and fast; it also refuses nesting
deep enough to overflow libcst's native parser (which would take the whole process down).
Where Python says no, libcst, which knows newer grammar than the running Python, decides."""

from __future__ import annotations

import ast

import libcst as cst


class BadSyntax(ValueError):
    def __init__(self, line: int, col: int, message: str):
        super().__init__(f"{line}:{col}: syntax error: {message}")
        self.line, self.col, self.message = line, col, message


def check(source: str) -> None:
    try:
        ast.parse(source)
    except (MemoryError, RecursionError) as e:
        raise BadSyntax(1, 1, f"too deeply nested ({type(e).__name__})") from None
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None) or 1
        col = getattr(e, "offset", None) or 1
        message = str(getattr(e, "msg", "") or e) or type(e).__name__
        if "too many" in message or "null bytes" in message:
            raise BadSyntax(line, col, message) from None
        try:
            cst.parse_module(source)
        except cst.ParserSyntaxError:
            raise BadSyntax(line, col, message) from None
