"""Tiny timm models for configs that name a timm architecture: a vision tower given as
`architecture` (TimmWrapperConfig and its kin: FastVLM's FastViT, Gemma 3n's MobileNetV5, the
Perception Encoder's ViT) is built by timm at its full size, which no key-name rule of shrink.py
can reach. The name is replaced by one of timm's own test configurations (`test_*`, a few
hundred thousand parameters) whose features have the same layout (a channels-first map, or
tokens), and the widths the config gave for the full tower (its `hidden_size`) follow the
tiny one's. A config whose model asks for a timm model name it leaves unset ("backbone is not
set in the config. Please set it to a timm model name.") gets the smallest channels-first one.
Without timm installed nothing changes: those types stay untried for want of timm."""

from __future__ import annotations

import functools
import importlib.util
import re

import torch

from .input_basics import BATCH  # the battery's batch: a batch norm over a 1 x 1 map needs two
from .tiny_sizes import IMAGE_SIZE

TINY = "test_*"  # timm's test configurations
MAP, TOKENS = "channels-first map", "tokens"



def available() -> bool:
    return importlib.util.find_spec("timm") is not None


@functools.lru_cache(maxsize=None)
def features(name: str, side: int | None = None) -> tuple[str | None, int, str, int] | None:
    """(layout, width, module, parameters) of timm model `name`'s features, built and run on
    the meta device (no memory, no compute) at `side` x `side` pixels, else at its default input
    size; None where it does not build or run there. The layout is MAP for (batch, width, h, w),
    TOKENS for (batch, tokens, width), else None (channels-last maps)."""
    import timm

    try:
        with torch.device("meta"):
            model = timm.create_model(name, pretrained=False, num_classes=0)
            size = model.pretrained_cfg.get("input_size") or (3, IMAGE_SIZE, IMAGE_SIZE)
            x = torch.empty(BATCH, size[0], side or size[1], side or size[2])
            y = model.forward_features(x)
    except Exception:  # noqa: BLE001 - a model that does not build or run at this size
        return None
    width = model.num_features
    layout = MAP if y.dim() == 4 and y.shape[1] == width else \
        TOKENS if y.dim() == 3 and y.shape[-1] == width else None
    return layout, width, type(model).__module__, sum(p.numel() for p in model.parameters())


def tiny_like(name: str | None) -> str | None:
    """The tiny timm model for full-size model `name` (None: any channels-first one): of the
    same layout at the battery's image size, from the same timm module where one is, else the
    one with the fewest parameters."""
    import timm

    want = features(name) if name else (MAP, 0, "", 0)
    if want is None or want[0] is None:
        return None
    fits = [(n, f) for n in timm.list_models(TINY)
            if (f := features(n, IMAGE_SIZE)) is not None and f[0] == want[0]]
    if not fits:
        return None
    return min(fits, key=lambda nf: (nf[1][2] != want[2], nf[1][3], nf[0]))[0]


def _timm_names(full: dict, small: dict, parent: dict | None = None):
    """(full dict, small dict, small parent dict) for every (sub-)config whose `architecture`
    names a timm model."""
    import timm

    if isinstance(full.get("architecture"), str) and timm.is_model(full["architecture"]):
        yield full, small, parent
    for key, value in full.items():
        if isinstance(value, dict) and isinstance(small.get(key), dict):
            yield from _timm_names(value, small[key], small)


def feature_channels(name: str, args: dict) -> list[int] | None:
    """The channels of each feature map timm model `name` gives with `features_only` (and its
    out_indices) in `args`; None where it does not build so."""
    import timm

    try:
        with torch.device("meta"):
            return timm.create_model(name, pretrained=False, **args).feature_info.channels()
    except Exception:  # noqa: BLE001 - no features_only form of this model
        return None


_CHANNELS = re.compile(r"channel")


def _follow_feature_channels(tiny: str, args: dict, parent: dict) -> None:
    """A list of channels per feature level beside a features_only tower (EdgeTAM's
    backbone_channel_list, read by its feature pyramid) takes the tiny tower's channels, in the
    order the list gives them (deepest first where it falls)."""
    channels = feature_channels(tiny, args) if args.get("features_only") else None
    if not channels:
        return
    for key, value in parent.items():
        if isinstance(key, str) and _CHANNELS.search(key) and isinstance(value, list) \
                and len(value) == len(channels) and len(value) > 1 \
                and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            parent[key] = channels[::-1] if value[0] > value[-1] else list(channels)


def replace_architectures(full: dict, small: dict) -> None:
    """Every timm `architecture` in the shrunk config `small` (from the defaults `full`)
    becomes its tiny_like; integers that equalled the full tower's width in that sub-config
    (the width its consumers are built for) take the tiny one's, `model_args` the tiny model
    does not take (the full one's own settings) go, and channel lists beside a features_only
    tower follow its feature channels."""
    if not available():
        return
    for full_part, small_part, parent in _timm_names(full, small):
        name = full_part["architecture"]
        tiny = tiny_like(name)
        if tiny is None:
            continue
        width, tiny_width = features(name)[1], features(tiny, IMAGE_SIZE)[1]
        small_part["architecture"] = tiny
        for key, value in full_part.items():
            if isinstance(value, int) and not isinstance(value, bool) and value == width \
                    and key not in ("num_classes", "num_labels"):
                small_part[key] = tiny_width
        if isinstance(full_part.get("model_args"), dict):
            # timm's own arguments, which the config's key-name rules do not describe (they
            # dropped out_indices as a backbone's): the defaults', less those tiny rejects
            small_part["model_args"] = _accepted(tiny, full_part["model_args"])
            if parent is not None:
                _follow_feature_channels(tiny, small_part["model_args"], parent)


_UNEXPECTED = re.compile(r"unexpected keyword argument '(\w+)'")


def _accepted(name: str, args: dict) -> dict:
    """The entries of `args` that timm model `name` takes."""
    import timm

    args = dict(args)
    while True:
        try:
            with torch.device("meta"):
                timm.create_model(name, pretrained=False, **args)
            return args
        except TypeError as e:
            bad = _UNEXPECTED.search(str(e))
            if not bad or bad[1] not in args:
                raise
            del args[bad[1]]


# The model's own demand for a timm model name its config leaves unset (TimmBackbone).
_UNSET_NAME = re.compile(r"(?P<key>\w+) is not set in the config\. Please set it to a timm model name")


def give_unset_timm_name(config, e: BaseException) -> bool:
    """Sets the timm model name the model's error asks for, where the config leaves it None,
    to the smallest tiny channels-first model (a backbone's features are maps)."""
    unset = _UNSET_NAME.search(str(e))
    if not unset or not available() or getattr(config, unset["key"], 0) is not None:
        return False
    tiny = tiny_like(None)
    if tiny is None:
        return False
    setattr(config, unset["key"], tiny)
    return True
