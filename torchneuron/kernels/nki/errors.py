"""The errors an NKI kernel gets on the software NeuronCore.

`NkiValidationError` is what AWS's NKI raises when a kernel breaks a hardware constraint; here
each one names the rule (a short id listed in docs/nki.md), the instruction, the buffers and their
shapes, so a kernel that passes here does not fail on hardware for a reason we could have seen.
"""

from __future__ import annotations


class NkiError(Exception):
    """Base class of the NKI simulator's errors."""


class NkiValidationError(NkiError, ValueError):
    """A kernel broke a rule of the NeuronCore (shapes, memories, dtypes, capacities)."""

    def __init__(self, rule: str, message: str):
        self.rule = rule
        super().__init__(f"[{rule}] {message}")


class NkiTypeError(NkiError, TypeError):
    """A value of the wrong kind where NKI needs a dtype, a tensor or an operator."""


class NkiUnsupportedError(NkiError, NotImplementedError):
    """A documented NKI construct the software NeuronCore does not run (listed in docs/nki.md)."""


def describe_parts(name: str, buffer_name: str, shape, dtype) -> str:
    label = f"'{name}' " if name else ""
    return f"{label}({buffer_name}, shape {tuple(shape)}, {dtype})"


def describe(t) -> str:
    """'name' (sbuf, shape (128, 512), float32) for error messages."""
    return describe_parts(t.name, t.buffer.name, t.shape, t.dtype)


def refuse(rule: str, message: str) -> None:
    raise NkiValidationError(rule, message)
