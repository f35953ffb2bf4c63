"""An input made from its documented type and shape: transformers documents every forward
argument as "name (`type` of shape `(dims)`)", and the battery reads the sizes those dims name
off the inputs already made or the config."""

from __future__ import annotations

import re

import torch

from .input_basics import AUDIO_SAMPLES, BATCH, SEQ, config_value, declared_modalities


# A documented argument: "past_values_padding (`torch.LongTensor` of shape `(batch_size,
# sequence_length)`):" in forward's docstring (transformers writes one for every model).
_DOCUMENTED = r"^\s*{name} \(`(?P<type>[^`]*)` of shape `\((?P<shape>[^)]*)\)`"
_BATCH_DIMS = {"batch_size", "num_images", "num_images_or_videos", "batch"}


def documented_shape(model, name: str) -> tuple[str, list[str]] | None:
    match = re.search(_DOCUMENTED.format(name=re.escape(name)), model.forward.__doc__ or "", re.M)
    if not match:
        return None
    return match["type"], [d.strip() for d in match["shape"].split(",") if d.strip()]


def _config_size(model, dim: str) -> int | None:
    value = config_value(model.config, dim) if getattr(model, "config", None) is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def documented_input(model, name: str, inputs: dict[str, torch.Tensor],
                     gen: torch.Generator) -> torch.Tensor | None:
    """A required input built from its documented type and shape, the sizes named in the
    shape read off the inputs already made (their own documented shapes say which axis is
    `sequence_length`, `num_channels`, `height`), else from a config size of that name (a
    decision transformer's `act_dim`), other lengths (`episode_length`) the battery's own
    length: sizes (`*_sizes`) are the config's size of that name or 1, a padding indicator is
    all zeros (nothing padded), an integer or boolean mask all ones (everything valid), other
    integers zeros (the first index), floats random. None where a size cannot be told."""
    documented = documented_shape(model, name)
    if documented is None:
        return None
    kind, dims = documented
    sizes: dict[str, int] = {}
    for other, value in inputs.items():
        known = documented_shape(model, other)
        if known and len(known[1]) == value.dim():
            sizes.update({d: n for d, n in zip(known[1], value.shape) if d.isidentifier()})
        if other == "pixel_values" and value.dim() >= 4:
            sizes.setdefault("height", value.shape[-2])
            sizes.setdefault("width", value.shape[-1])
        if other == "pixel_values" and value.dim() == 5:
            sizes.setdefault("num_images", value.shape[1])
    shape = []
    for dim in dims:
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
    if name.endswith("_sizes"):
        # Sizes are counts whatever the documented type (VideoLLaMA3's merge_sizes, a
        # `torch.Tensor`): the config's size of that name, else 1, the size that changes nothing.
        return torch.full(shape, _config_size(model, name[:-1]) or 1, dtype=torch.long)
    if "Long" in kind or "Bool" in kind:
        dtype = torch.bool if "Bool" in kind else torch.long
        fill = 0 if "padding" in name else 1 if "mask" in name else 0
        return torch.full(shape, fill, dtype=dtype)
    return torch.randn(*shape, generator=gen)
