"""Settings a model reads that its config class does not define. Some sub-configs lack a
setting their parent holds (DBRX's attention config reads `rope_theta`, which lives in the
parent's `rope_parameters`; Moonshine Streaming's decoder reads `num_key_value_heads`, which
only its encoder config has): checkpoints written by the original code carry it, a config
built from the class's defaults does not. The battery gives such a setting the value the
config tree holds under the same name, as the checkpoint would."""

from __future__ import annotations

import re

_MISSING = re.compile(r"^'(?P<owner>\w+)' object has no attribute '(?P<name>\w+)'$")
# A rate of randomness nobody holds is 0, as the battery's other random rates (shrink.py).
_RANDOM_RATE = re.compile(r"dropout|drop_path|_prob$")
# A special token id nobody holds (Qwen2.5-Omni's thinker reads vision_start_token_id, which
# only the composite config's checkpoints carry) gets an id of its own.
_TOKEN_ID = re.compile(r"_token_(id|index)$")
MAX_REPAIRS = 4


def _configs(config):
    """The config and every sub-config under it, each once."""
    from transformers import PretrainedConfig

    seen, todo = set(), [config]
    while todo:
        c = todo.pop(0)
        if id(c) in seen:
            continue
        seen.add(id(c))
        yield c
        todo.extend(v for v in vars(c).values() if isinstance(v, PretrainedConfig))


def _value_named(d: dict, name: str):
    """The first value stored under `name` in a config dict, its nested dicts included."""
    if d.get(name) is not None:
        return d[name]
    for value in d.values():
        if isinstance(value, dict):
            found = _value_named(value, name)
            if found is not None:
                return found
    return None


def _free_token_id(config) -> int | None:
    """The highest id of the vocabulary that no special token of the config tree uses: the
    battery's token ids avoid every special id, so no input holds it."""
    from .input_basics import NoInputRecipe, vocab_size
    from .shrink import special_token_ids

    try:
        vocab = vocab_size(config)
    except NoInputRecipe:
        return None
    taken = special_token_ids(config)
    return next((i for i in range(vocab - 1, -1, -1) if i not in taken), None)


def give_missing_setting(config, e: BaseException) -> bool:
    """Where `e` says a config of the tree lacks a setting (AttributeError "'DbrxAttentionConfig'
    object has no attribute 'rope_theta'"), sets it there to the value the tree holds under
    that name (0.0 for a random rate nobody holds, an unused id for a token id nobody holds);
    True if it set one."""
    match = _MISSING.match(str(e)) if isinstance(e, AttributeError) else None
    if not match:
        return False
    owners = [c for c in _configs(config) if type(c).__name__ == match["owner"]
              and not hasattr(c, match["name"])]
    if not owners:
        return False
    value = _value_named(config.to_dict(), match["name"])
    if value is None and _RANDOM_RATE.search(match["name"]):
        value = 0.0
    if value is None and _TOKEN_ID.search(match["name"]):
        value = _free_token_id(config)
    if value is None:
        return False
    for owner in owners:
        setattr(owner, match["name"], value)
    return True
