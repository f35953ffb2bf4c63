"""An input made from its documented type and shape: transformers documents every forward
argument as "name (`type` of shape `(dims)`)", and the battery reads the sizes those dims name
off the inputs already made or the config."""

from __future__ import annotations

import inspect
import re

import torch

from .input_basics import AUDIO_SAMPLES, BATCH, SEQ, config_value, declared_modalities


# A documented argument: "past_values_padding (`torch.LongTensor` of shape `(batch_size,
# sequence_length)`):" in forward's docstring (transformers writes one for every model). Some
# leave the type's backticks out ("classes_structure (torch.LongTensor of shape
# `(batch_size)`)"), and a size may carry a parenthesised note ("`(total_classes (>=
# batch_size), sequence_length)`", OmDet-Turbo's), so the shape allows one level of brackets.
_DOCUMENTED = (r"^\s*{name} \((?:`(?P<type>[^`]*)`|(?P<bare>[\w.]+)) of shape "
               r"`\((?P<shape>(?:[^()`]|\([^()`]*\))*)\)`")
_BATCH_DIMS = {"batch_size", "num_images", "num_images_or_videos", "batch"}
# A size's note that bounds it from below by another size: "total_classes (>= batch_size)".
_NOTED = re.compile(r"^(?P<dim>[^(]*?)\s*\((?P<note>[^)]*)\)$")
_AT_LEAST = re.compile(r"^>=\s*(?P<bound>\w+)$")


def _documented_dims(model, name: str) -> tuple[str, list[tuple[str, str | None]]] | None:
    """(type, [(size, the size its note says it is at least, or None)]) of `name`'s documented
    shape; a note is taken off its size's name."""
    match = re.search(_DOCUMENTED.format(name=re.escape(name)), model.forward.__doc__ or "", re.M)
    if not match:
        return None
    dims = []
    for raw in (d.strip() for d in match["shape"].split(",")):
        noted = _NOTED.match(raw) if raw else None
        bound = _AT_LEAST.match(noted["note"].strip()) if noted else None
        if raw:
            dims.append((noted["dim"] if noted else raw, bound["bound"] if bound else None))
    return (match["type"] or match["bare"]).strip(), dims


_NEXT_ARGUMENT = re.compile(r"^\s*\w+ \(", re.M)


def _description(model, name: str) -> str:
    """The text documenting `name` after its type and shape, up to the next argument ("" where
    none): its lists ("- 1 for frames that are **not masked**") included."""
    doc = model.forward.__doc__ or ""
    match = re.search(_DOCUMENTED.format(name=re.escape(name)), doc, re.M)
    if not match:
        return ""
    rest = doc[match.end():]
    following = _NEXT_ARGUMENT.search(rest)
    return rest[:following.start()] if following else rest


def _counts(model, name: str) -> bool:
    """Whether `name`'s documentation says it holds counts ("This tensor indicates the number
    of classes for each task": OmDet-Turbo's classes_structure)."""
    return "number of" in _description(model, name)


# An input a mask's documentation says it masks: "padding samples of `input_values`".
_MASKED = re.compile(r"\bof `(\w+)`")
# A mask whose documentation says 1 keeps: "1 for samples that are **not masked**".
_ONE_KEEPS = re.compile(r"1 for [^,.]*not masked")


def _padding_mask_keeps(model, name: str) -> bool:
    """A padding mask documented with 1 for what is not masked (PE's `padding_mask`), unlike
    a padding indicator (`past_values_padding`, 1 where padded, so all zeros here)."""
    return "padding" in name and "mask" in name \
        and bool(_ONE_KEEPS.search(_description(model, name)))


def masks_samples_of(model, name: str) -> bool:
    """Whether forward documents a mask of `name`'s samples ("Mask to avoid performing attention
    on padding samples of `input_values`": PE Audio's padding_mask)."""
    for other in inspect.signature(model.forward).parameters:
        masked = _MASKED.search(_description(model, other)) if "mask" in other else None
        if masked and masked[1] == name:
            return True
    return False


def _shaped_sizes(model, inputs: dict[str, torch.Tensor]) -> dict[str, int]:
    """The sizes each input already made gives its documented axes. An input with one axis
    more than documented, of size 1 after the batch (audio samples in the "audio transposed"
    layout, a codec's channel), gives the others."""
    sizes: dict[str, int] = {}
    for other, value in inputs.items():
        known = documented_shape(model, other)
        shape = tuple(value.shape)
        if known and value.dim() == len(known[1]) + 1 and shape[1:2] == (1,):
            shape = shape[:1] + shape[2:]
        if known and len(known[1]) == len(shape):
            sizes.update({d: n for d, n in zip(known[1], shape) if d.isidentifier()})
    return sizes


def documented_shape(model, name: str) -> tuple[str, list[str]] | None:
    documented = _documented_dims(model, name)
    return None if documented is None else (documented[0], [d for d, _ in documented[1]])


def _config_size(model, dim: str) -> int | None:
    value = config_value(model.config, dim) if getattr(model, "config", None) is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def documented_input(model, name: str, inputs: dict[str, torch.Tensor],
                     gen: torch.Generator) -> torch.Tensor | None:
    """A required input built from its documented type and shape, the sizes named in the
    shape read off the inputs already made (their own documented shapes say which axis is
    `sequence_length`, `num_channels`, `height`), else from a config size of that name (a
    decision transformer's `act_dim`), other lengths (`episode_length`) the battery's own
    length, and a size whose note bounds it below by another size ("total_classes (>=
    batch_size)") that other's where nothing else names it; a mask that names the input it
    masks ("samples of `input_values`") takes that input's sizes first: sizes (`*_sizes`, and
    integers documented as "the number of" something) are the config's size of that name or 1
    (one class per task: its counts then add up to a batch of classes), a padding mask whose
    documentation says 1 is "not masked" all ones (integers), other padding indicators all
    zeros (nothing padded), an integer or boolean mask all ones (everything valid), other
    integers zeros (the first index), floats random. None where a size cannot be told."""
    documented = _documented_dims(model, name)
    if documented is None:
        return None
    kind, noted = documented
    sizes = _shaped_sizes(model, inputs)
    masked = _MASKED.search(_description(model, name)) if "mask" in name else None
    if masked and masked[1] in inputs:  # the input it masks says its sizes first
        sizes.update(_shaped_sizes(model, {masked[1]: inputs[masked[1]]}))
    for other, value in inputs.items():
        if other == "pixel_values" and value.dim() >= 4:
            sizes.setdefault("height", value.shape[-2])
            sizes.setdefault("width", value.shape[-1])
        if other == "pixel_values" and value.dim() == 5:
            sizes.setdefault("num_images", value.shape[1])
    shape = []
    for dim, bound in noted:
        if bound is not None and dim not in sizes and _config_size(model, dim) is None:
            dim = bound  # a size nothing names, at least another: that other's (its smallest)
        if dim.isdigit():
            shape.append(int(dim))
        elif dim in _BATCH_DIMS:
            shape.append(BATCH)
        elif dim in sizes:
            shape.append(int(sizes[dim]))
        elif dim == "sequence_length" and declared_modalities(model) == ("audio",) \
                and "Tensor" in kind and "Long" not in kind and "Bool" not in kind:
            shape.append(AUDIO_SAMPLES)  # a waveform (a speech encoder-decoder's `inputs`)
        elif dim == "sequence_length":  # a sequence of its own: the config's length for it
            prefix = re.sub(r"_(inputs|ids|values)$", "", name)  # (OneFormer's task_seq_len)
            length = config_value(model.config, f"{prefix}_seq_len", f"{prefix}_sequence_length")
            shape.append(length if isinstance(length, int) else SEQ)
        elif dim.isidentifier() and _config_size(model, dim) is not None:
            shape.append(_config_size(model, dim))  # a size the config names (`act_dim`)
        elif dim.endswith("_length"):  # another sequence (an episode): the battery's length
            shape.append(SEQ)
        else:
            return None
    if name.endswith("_sizes") or ("Long" in kind and _counts(model, name)):
        # Sizes are counts whatever the documented type (VideoLLaMA3's merge_sizes, a
        # `torch.Tensor`): the config's size of that name, else 1, the size that changes nothing.
        return torch.full(shape, _config_size(model, name[:-1]) or 1, dtype=torch.long)
    if _padding_mask_keeps(model, name):
        # 1 keeps, and integers whatever the documented type (PE's padding masks, typed
        # `torch.Tensor`, are summed into lengths that slice)
        return torch.ones(*shape, dtype=torch.bool if "Bool" in kind else torch.long)
    if "Long" in kind or "Bool" in kind:
        dtype = torch.bool if "Bool" in kind else torch.long
        fill = 0 if "padding" in name else 1 if "mask" in name else 0
        return torch.full(shape, fill, dtype=dtype)
    return torch.randn(*shape, generator=gen)
