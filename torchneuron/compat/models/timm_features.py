"""Sizes beside a timm tower built with `features_only` (a feature pyramid's input): the
channels and map sizes per level that another part of the config lists for it, and the patch
grid a prompt encoder makes to match its coarsest map. Where the tower is replaced by a tiny one
(timm_models.py) they follow the tiny one; where the config names a timm `backbone` that stays
(OmDet-Turbo's Swin) the channels stay what it gives. Without timm nothing changes."""

from __future__ import annotations

import re

import torch

from .tiny_sizes import IMAGE_SIZE


def feature_info(name: str, args: dict) -> list[dict] | None:
    """Each feature level's `num_chs` and `reduction` timm model `name` gives with
    `features_only` (and its out_indices) in `args`, built on the meta device; None where it
    does not build so."""
    import timm

    try:
        with torch.device("meta"):
            return timm.create_model(name, pretrained=False, **args).feature_info.get_dicts()
    except Exception:  # noqa: BLE001 - no features_only form of this model
        return None


def feature_channels(name: str, args: dict) -> list[int] | None:
    info = feature_info(name, args)
    return None if info is None else [level["num_chs"] for level in info]


def _ints(value) -> bool:
    return isinstance(value, list) and len(value) > 1 \
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


_CHANNELS = re.compile(r"channel")


def follow_channel_list(tiny: str, args: dict, parent: dict) -> None:
    """A list of channels per feature level beside a features_only tower (EdgeTAM's
    backbone_channel_list, read by its feature pyramid) takes the tiny tower's channels, in the
    order the list gives them (deepest first where it falls). Matched by name and length, not
    by value: EdgeTAM's defaults list RepViT's channels beside a tower they name ResNet-50 (the
    RepViT name sits under a misspelt key, `archirecture`)."""
    channels = feature_channels(tiny, args) if args.get("features_only") else None
    if not channels:
        return
    for key, value in parent.items():
        if isinstance(key, str) and _CHANNELS.search(key) and _ints(value) \
                and len(value) == len(channels):
            parent[key] = channels[::-1] if value[0] > value[-1] else list(channels)


def _pair_sizes(value) -> bool:
    """A list of [height, width] per level, each level half the one before (or after)."""
    if not (isinstance(value, list) and len(value) > 1 and all(
            isinstance(v, list) and len(v) == 2 and _ints(v + [0]) for v in value)):
        return False
    sides = [v[0] for v in value]
    return all(a == 2 * b for a, b in zip(sides, sides[1:])) \
        or all(2 * a == b for a, b in zip(sides, sides[1:]))


def follow_map_sizes(tiny: str, args: dict, parent: dict) -> dict[int, int]:
    """A list of feature map sizes per level beside a features_only tower (EdgeTAM's
    backbone_feature_sizes, [[256, 256], [128, 128], [64, 64]]: a 1024-pixel image over its
    tower's first three reductions, 4, 8 and 16) becomes the battery's image over the tiny
    tower's first reductions, in the list's order: the tiny tower reduces 2, 4, 8 (scaling the
    list with the image gave maps four times smaller than it makes). Returns {old side: new
    side} for the patch grid to follow."""
    info = feature_info(tiny, args) if args.get("features_only") else None
    if not info:
        return {}
    moved: dict[int, int] = {}
    for key, value in parent.items():
        if not (isinstance(key, str) and key.endswith("_sizes") and _pair_sizes(value)
                and len(value) <= len(info)):
            continue
        sides = [IMAGE_SIZE // level["reduction"] for level in info[:len(value)]]
        if value[0][0] < value[-1][0]:
            sides = sides[::-1]  # coarsest first
        parent[key] = [[s, s] for s in sides]
        moved.update({old[0]: new for old, new in zip(value, sides)})
    return moved


def follow_patch_grid(full: dict, small: dict, moved: dict[int, int]) -> None:
    """A patch grid (image_size // patch_size, anywhere in the config) that equals a feature
    map's side in the defaults (EdgeTAM's prompt encoder: 1024 // 16 = 64, its coarsest map,
    to which it adds its dense prompts) keeps equal to that map's new side: its patch size
    becomes the shrunk image over that side."""
    image, patch = full.get("image_size"), full.get("patch_size")
    small_image = small.get("image_size")
    if all(isinstance(v, int) and not isinstance(v, bool) and v > 0
           for v in (image, patch, small_image)) and moved.get(image // patch) \
            and small_image % moved[image // patch] == 0:
        small["patch_size"] = small_image // moved[image // patch]
    for key, value in full.items():
        if isinstance(value, dict) and isinstance(small.get(key), dict):
            follow_patch_grid(value, small[key], moved)


def _timm_backbones(full: dict, small: dict, parents: tuple[dict, dict] | None = None):
    """(full dict, (full parent, small parent)) for every sub-config whose `backbone` names a
    timm model it builds with `features_only` (TimmBackbone's config)."""
    import timm

    if isinstance(full.get("backbone"), str) and full.get("features_only") \
            and timm.is_model(full["backbone"]) and parents is not None:
        yield full, parents
    for key, value in full.items():
        if isinstance(value, dict) and isinstance(small.get(key), dict):
            yield from _timm_backbones(value, small[key], (full, small))


def keep_backbone_channels(full: dict, small: dict) -> None:
    """A list beside a timm `backbone` (kept at its own size) that lists its feature channels
    at the levels its `out_indices` name, in either order, keeps them: the "every width"
    profile narrows `*_channels` lists, which the backbone does not follow (OmDet-Turbo's
    encoder_in_channels, [192, 384, 768] from Swin-T, sizes a LayerNorm per level)."""
    import importlib.util

    if importlib.util.find_spec("timm") is None:
        return
    for part, (full_parent, parent) in _timm_backbones(full, small):
        args = {"features_only": True}
        if isinstance(part.get("out_indices"), (list, tuple)):
            args["out_indices"] = tuple(part["out_indices"])
        channels = feature_channels(part["backbone"], args)
        for key, value in full_parent.items():
            if channels and _ints(value) and value in (channels, channels[::-1]) \
                    and key in parent:
                parent[key] = list(value)
