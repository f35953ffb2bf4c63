"""A shrink profile for sizes a config derives when they are left unset. A config class whose
field defaults to None and is filled in __post_init__ from other sizes (X-Codec's codebook_dim
is the acoustic plus the semantic hidden size) stores the derived full-size value in the
default config's dict; no name rule shrinks it, and the model's parts then disagree (a codebook
1024 wide for states 128 wide). Left unset again, the config derives it from the shrunk sizes,
as the class documents. Tried after the profiles that keep such values, so no model that runs
with one of those changes."""

from __future__ import annotations

import dataclasses

PROFILE = "derived sizes derived again"


def _unset_by_default(config_class) -> set[str]:
    """The fields of `config_class` whose default is None."""
    if not (isinstance(config_class, type) and dataclasses.is_dataclass(config_class)):
        return set()
    return {f.name for f in dataclasses.fields(config_class) if f.default is None}


def unset_derived_sizes(config_class, full: dict, small: dict) -> None:
    """Sets back to None, in `small` (the shrunk dict of `full`, changed in place), each integer
    that `config_class` (and each of its sub-config classes, for its sub-dict) defaults to None
    and that shrinking left at its full-size value."""
    for key in _unset_by_default(config_class):
        value = full.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and small.get(key) == value:
            small[key] = None
    for name, sub_class in (getattr(config_class, "sub_configs", None) or {}).items():
        if isinstance(full.get(name), dict) and isinstance(small.get(name), dict):
            unset_derived_sizes(sub_class, full[name], small[name])
