"""Tiny timm models for configs that name a timm architecture: a vision tower given as
`architecture` (TimmWrapperConfig and its kin: FastVLM's FastViT, Gemma 3n's MobileNetV5, the
Perception Encoder's ViT) is built by timm at its full size, which no key-name rule of shrink.py
can reach. The name is replaced by one of timm's own test configurations (`test_*`, a few
hundred thousand parameters) whose features have the same layout (a channels-first map, or
tokens), and the widths the config gave for the full tower (its `hidden_size`) follow the
tiny one's. A config whose model asks for a timm model name it leaves unset ("backbone is not
set in the config. Please set it to a timm model name.") gets the smallest channels-first one,
and one that reads a timm argument its tower's model_args leave out (Perception LM's
`model_args["embed_dim"]`) the smallest tiny model that has that argument. Sizes listed beside
a features_only tower follow it in timm_features.py. Without timm installed nothing changes:
those types stay untried for want of timm."""

from __future__ import annotations

import functools
import importlib.util
import re

import torch

from . import timm_features
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


def _timm_names(full: dict, small: dict, parents: tuple[dict, dict] | None = None):
    """(full dict, small dict, (full parent, small parent) or None) for every (sub-)config
    whose `architecture` names a timm model."""
    import timm

    if isinstance(full.get("architecture"), str) and timm.is_model(full["architecture"]):
        yield full, small, parents
    for key, value in full.items():
        if isinstance(value, dict) and isinstance(small.get(key), dict):
            yield from _timm_names(value, small[key], (full, small))


def replace_architectures(full: dict, small: dict) -> None:
    """Every timm `architecture` in the shrunk config `small` (from the defaults `full`)
    becomes its tiny_like; integers that equalled the full tower's width in that sub-config
    (the width its consumers are built for) take the tiny one's, `model_args` the tiny model
    does not take (the full one's own settings) go, and the channels and map sizes listed
    beside a features_only tower, and a patch grid matching one of those maps, follow it
    (timm_features.py)."""
    if not available():
        return
    moved: dict[int, int] = {}  # feature map sides that changed: old to new
    for full_part, small_part, parents in _timm_names(full, small):
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
        if full_part.get("model_args", 0) is None:
            # timm builds with `model_args or {}`: the same tower, but a model that reads one of
            # them (Perception LM's projector, model_args["embed_dim"]) now names it in a
            # KeyError, which give_read_model_arg answers
            small_part["model_args"] = {}
        if isinstance(full_part.get("model_args"), dict):
            # timm's own arguments, which the config's key-name rules do not describe (they
            # dropped out_indices as a backbone's): the defaults', less those tiny rejects
            small_part["model_args"] = _accepted(tiny, full_part["model_args"])
            if parents is not None:
                timm_features.follow_channel_list(tiny, small_part["model_args"], parents[1])
                moved.update(timm_features.follow_map_sizes(tiny, small_part["model_args"],
                                                            parents[1]))
    timm_features.follow_patch_grid(full, small, moved)


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


def _timm_configs(config):
    """Every (sub-)config object of `config` that names a timm model by `architecture`."""
    if isinstance(getattr(config, "architecture", None), str) \
            and isinstance(getattr(config, "model_args", None), dict):
        yield config
    for name in getattr(config, "sub_configs", None) or {}:
        sub = getattr(config, name, None)
        if sub is not None and sub is not config:
            yield from _timm_configs(sub)


def tiny_with(argument: str) -> tuple[str, int] | None:
    """(name, value) of the tiny timm model with the fewest parameters that runs at the
    battery's image size and has an integer `argument` of its own (timm models keep their
    constructor's `embed_dim` as an attribute); None where none has."""
    import timm

    found = []
    for name in timm.list_models(TINY):
        f = features(name, IMAGE_SIZE)
        if f is None or f[0] is None:
            continue
        with torch.device("meta"):
            value = getattr(timm.create_model(name, pretrained=False), argument, None)
        if isinstance(value, int) and not isinstance(value, bool):
            found.append((f[3], name, value))
    return min(found)[1:] if found else None


def give_read_model_arg(config, e: BaseException) -> bool:
    """A model that reads a timm argument its tower's `model_args` leave out (KeyError
    'embed_dim': Perception LM sizes its projector from model_args["embed_dim"], which its
    defaults leave unset beside a ResNet-50 its checkpoints never use) gets the smallest tiny
    timm model that has that argument, and the argument at that model's own value: the
    model's reading says what kind of tower it is built for (a ViT, here)."""
    if not isinstance(e, KeyError) or not e.args or not isinstance(e.args[0], str) \
            or not available():
        return False
    argument = e.args[0]
    parts = [c for c in _timm_configs(config) if argument not in c.model_args]
    tiny = tiny_with(argument) if parts else None
    if tiny is None:
        return False
    for part in parts:
        part.architecture = tiny[0]
        part.model_args = {**part.model_args, argument: tiny[1]}
    return True
