"""Sizes that follow what shrank, after the key-name rules (shrink.py) have run: stage widths
another part lists, a width equal to another part's hidden size, feature-map sizes that scale
with the image, and the multimodal rotary sections a config class declares but leaves out.
Each compares the default config with the shrunk one, part by part."""

from __future__ import annotations

from .shrink import OTHER_WIDTH, grows_from, scaled_sections


MROPE_SPLIT = (1, 1, 1)  # temporal, height, width: any split whose sum is the rotary half


def add_rotary_sections(config_class, d: dict) -> None:
    """A config class that declares `mrope_section` (multimodal rotary sections: time, height,
    width) but whose defaults leave it out gets sections that sum to half the shrunk rotary
    dimension; the model's own fallback is sized for the full head."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for name, sub_class in (getattr(config_class, "sub_configs", None) or {}).items():
        sub = d.get(name)
        if isinstance(sub, dict) and sub.get("model_type") in CONFIG_MAPPING:
            sub_class = CONFIG_MAPPING[sub["model_type"]]  # AutoConfig: the dict names its class
        if isinstance(sub, dict) and isinstance(sub_class, type):
            add_rotary_sections(sub_class, sub)
    rope = d.get("rope_parameters")
    if "mrope_section" not in getattr(config_class, "ignore_keys_at_rope_validation", ()) \
            or not isinstance(rope, dict) or "mrope_section" in rope or "rope_type" not in rope:
        return  # none, given, or not one flat set of parameters (per layer kind, or empty)
    head_dim = d.get("head_dim")
    if not isinstance(head_dim, int):
        hidden, heads = d.get("hidden_size"), d.get("num_attention_heads")
        if not (isinstance(hidden, int) and isinstance(heads, int) and heads):
            return
        head_dim = hidden // heads
    rotary = int(head_dim * rope.get("partial_rotary_factor", d.get("partial_rotary_factor") or 1.0))
    rope["mrope_section"] = scaled_sections(list(MROPE_SPLIT), rotary // 2)


def _leaves(full: dict, small: dict, wanted):
    """(default, shrunk, small dict, key) for every value `wanted(key, value)` accepts in a
    config and its sub-configs (those both configs have as dicts)."""
    for key, value in full.items():
        if isinstance(value, dict) and isinstance(small.get(key), dict):
            yield from _leaves(value, small[key], wanted)
        elif wanted(key, value):
            yield value, small.get(key), small, key


def _pairs(full: dict, small: dict):
    """_leaves for every list."""
    return _leaves(full, small, lambda key, value: isinstance(value, list))


def follow_stage_widths(full: dict, small: dict) -> None:
    """Stage widths that shrank in one sub-config are shrunk alike where another part of the
    config lists the same widths, in either order (SAM2's neck lists the backbone's stages
    last first in backbone_channel_list)."""
    widths = {}
    for value, shrunk, _, _ in _pairs(full, small):
        if grows_from(value, value[0] if value else 0) and isinstance(shrunk, list) \
                and len(shrunk) == len(value) and shrunk != value:
            widths.update(zip(value, shrunk))
    if not widths:
        return
    for value, shrunk, node, key in _pairs(full, small):
        if value and shrunk == value and all(isinstance(v, int) and v in widths for v in value) \
                and (grows_from(value, value[0]) or grows_from(value[::-1], value[-1])):
            node[key] = [widths[v] for v in value]


def _ints(full: dict, small: dict):
    """_leaves for every integer under a string key."""
    return _leaves(full, small, lambda key, value: isinstance(value, int) and
                   not isinstance(value, bool) and isinstance(key, str))


def follow_other_parts_width(full: dict, small: dict) -> None:
    """A width no rule shrank that equals another part's hidden_size in the defaults follows
    that part where every part of that width shrank alike (SAM2's fpn_hidden_size feeds the
    mask decoder, whose hidden_size is the same 256; so does the output_channels of SAM's
    vision tower). Sine-cosine position features (num_pos_feats, two values each) that are half
    such a width in the defaults stay half of it (SAM adds them to the vision tower's output)."""
    widths: dict[int, set] = {}
    for value, shrunk, _, key in _ints(full, small):
        if key == "hidden_size" and shrunk != value:
            widths.setdefault(value, set()).add(shrunk)
    for value, shrunk, node, key in _ints(full, small):
        if key != "hidden_size" and (OTHER_WIDTH.search(key) or key == "output_channels") \
                and shrunk == value and len(widths.get(value, ())) == 1:
            node[key] = next(iter(widths[value]))
    for value, shrunk, node, key in _ints(full, small):  # after output_channels has followed
        if key == "num_pos_feats" and shrunk == value and len(widths.get(2 * value, ())) == 1:
            node[key] = next(iter(widths[2 * value])) // 2  # a sine and a cosine per feature


def scale_feature_map_sizes(full: dict, small: dict) -> None:
    """Feature map sizes listed per level as [height, width] (SAM2's backbone_feature_sizes,
    a quarter, an eighth and a sixteenth of the image) shrink with the image."""
    scales = {value // shrunk for value, shrunk, _, key in _ints(full, small)
              if key == "image_size" and shrunk and value % shrunk == 0 and value != shrunk}
    if len(scales) != 1:
        return
    scale = scales.pop()
    for value, shrunk, node, key in _pairs(full, small):
        if key.endswith("_sizes") and shrunk == value and value \
                and all(isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and x % scale == 0
                                                                   for x in v) for v in value):
            node[key] = [[x // scale for x in v] for v in value]
