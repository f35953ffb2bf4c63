"""A shrunk config its class rejects, repaired by the class's own rule: the validation error
names two sizes it ties ("`a.b` (512) must equal `c.d` (64)"), a size it asks for, layer
indices into a tower that shrank, or a length the defaults leave unset; the battery shrank them
independently, so it sets the one the message names to what the message asks."""

from __future__ import annotations

import re


# A config class that ties two sizes says so when it validates: "`a.b` (512) must equal
# `c.d` (64)". The battery shrank both independently; it follows the class's own rule.
_TIED_SIZE = re.compile(
    r"`?(?P<key>[A-Za-z_][\w.]*)`? \((?P<got>\d+)\) (?:must|should) (?:equal|match|be equal to|"
    r"be the same as) (?:the backbone )?`?[\w.]+(?: // [\w.]+)?`? \((?P<want>\d+)\)")
MAX_TIED_SIZE_REPAIRS = 4


# The same rule said without the sizes: "adapter_in_dim must match hidden_size".
_TIED_NAMES = re.compile(r"`?(?P<key>[A-Za-z_]\w*)`? must (?:match|equal) `?(?P<other>[A-Za-z_]\w*)`?$",
                         re.MULTILINE)


def set_tied_name(d: dict, key: str, other: str) -> bool:
    """Sets `key` to the value of `other` in the (sub-)config dict that has both."""
    if isinstance(d.get(key), int) and isinstance(d.get(other), int) and d[key] != d[other]:
        d[key] = d[other]
        return True
    return any(set_tied_name(v, key, other) for v in d.values() if isinstance(v, dict))


# A length the defaults leave unset and the model requires: "The `prediction_length` config
# needs to be specified."
_REQUIRED_LENGTH = re.compile(r"`(?P<key>\w+_length)` config needs to be specified")
REQUIRED_LENGTH = 8


def give_required_length(config, e: BaseException) -> bool:
    """Sets the length the model's error asks for, where the config leaves it None, and the
    other lengths left None, which the config derives from it when it is given (a
    forecaster's context_length defaults to its prediction_length)."""
    required = _REQUIRED_LENGTH.search(messages(e))
    if not required or getattr(config, required["key"], 0) is not None:
        return False
    for key, value in config.to_dict().items():
        if key.endswith("_length") and value is None:
            setattr(config, key, REQUIRED_LENGTH)
    return True


# The same rule with the value asked for first ("hidden_size_per_layer_input must be 0, got
# 256"), or as the last of a list ("hidden_size should be equal to the last value in
# out_features. hidden_size = 64, out_features = 256").
_ASKED_FIRST = re.compile(r"`?(?P<key>[A-Za-z_][\w.]*)`? must be (?P<want>\d+), got (?P<got>\d+)")
_LAST_OF_LIST = re.compile(r"(?P<key>\w+) should be equal to the last value in (?P<other>\w+)\. "
                           r"(?P=key) = (?P<got>\d+), (?P=other) = (?P<want>\d+)")
# Layer indices into a tower that shrank: "`adapter_config.vision_feature_layer` [24, 18] must
# index the 2 layers of `vision_config`."
_LAYER_INDICES = re.compile(r"`(?P<key>[\w.]+)` \[(?P<values>[\d, ]+)\] must index the "
                            r"(?P<layers>\d+) layers")


def repair_tied_size(small: dict, message: str) -> bool:
    tied = _TIED_SIZE.search(message) or _ASKED_FIRST.search(message) or _LAST_OF_LIST.search(message)
    if tied:
        return set_tied_size(small, tied["key"], int(tied["got"]), int(tied["want"]))
    indices = _LAYER_INDICES.search(message)
    if indices:
        values = [int(v) for v in indices["values"].split(",")]
        return set_tied_size(small, indices["key"], values, kept_indices(values, int(indices["layers"])))
    named = _TIED_NAMES.search(message)
    return bool(named) and set_tied_name(small, named["key"], named["other"])


def kept_indices(values: list[int], layers: int) -> list[int]:
    """Layer indices of the full tower mapped into `layers` layers keeping their order: the
    deepest named layer is the last one, the next deepest the one before (down to the first)."""
    deepest_first = sorted(set(values), reverse=True)
    return [max(0, layers - 1 - deepest_first.index(v)) for v in values]


def set_tied_size(d: dict, key: str, got, want) -> bool:
    """Sets `key` (a dotted path from this config or from one of its sub-configs) from `got`
    to `want`."""
    *parents, leaf = key.split(".")
    node = d
    for parent in parents:
        node = node.get(parent) if isinstance(node, dict) else None
    if isinstance(node, dict) and node.get(leaf) == got:
        node[leaf] = want
        return True
    return any(set_tied_size(v, key, got, want) for v in d.values() if isinstance(v, dict))


def messages(e: BaseException) -> str:
    """The message of an error and of every error it was raised from."""
    parts = []
    while e is not None:
        parts.append(str(e))
        e = e.__cause__ or e.__context__
    return "\n".join(parts)
