"""nl.NKIObject: the base class of the objects kernels take as arguments (configurations,
@dataclass groups of tensors), as AWS's kernel library passes them."""

from __future__ import annotations

import copy
import dataclasses


class NKIObject:
    """`Config(tile=128)` sets attributes from keywords; @dataclass subclasses bring their own
    __init__. Tensors among an argument's attributes become the kernel's HBM tensors."""

    def __init__(self, **kwargs):
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


def is_object(value) -> bool:
    """An argument whose attributes may hold tensors: an NKIObject or a dataclass instance."""
    return isinstance(value, NKIObject) or (dataclasses.is_dataclass(value)
                                            and not isinstance(value, type))


def attributes(value) -> dict:
    return dict(vars(value)) if hasattr(value, "__dict__") else {
        f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def with_attributes(value, mapped: dict):
    """A shallow copy of `value` with its attributes replaced (frozen dataclasses included)."""
    clone = copy.copy(value)
    for key, item in mapped.items():
        object.__setattr__(clone, key, item)
    return clone
