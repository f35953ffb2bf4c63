"""The inputs a tiny model is run with, derived from its config and forward (never from a
hand-written per-model list): the main input (main_input.py), an input for each declared
modality, every documented input where asked, the placeholders image tokens need, and the
labels its head's training loss takes. Everything is made on the CPU from a fixed seed; the
neuron run gets copies."""

from __future__ import annotations

import inspect
import re

import torch

from .documented_shapes import documented_input, documented_shape
from .input_basics import (BATCH, DECODER_SEQ, NoInputRecipe, config_value,
                           declared_modalities, named, required_params, token_ids, vocab_size)
from .main_input import LAYOUTS, feature_width, main_input


def _images_each_token_sees(model, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Beside several images per sample and token ids, an `image_attention_mask` forward takes
    without a documented shape says which images each token sees, (batch, tokens, images)
    (IDEFICS' cross-attention): every token sees every image."""
    pixels, ids = inputs.get("pixel_values"), inputs.get("input_ids")
    if pixels is None or ids is None or pixels.dim() != 5 or "image_attention_mask" in inputs \
            or not named(model, "image_attention_mask") \
            or documented_shape(model, "image_attention_mask") is not None:
        return inputs
    return {**inputs, "image_attention_mask": torch.ones(*ids.shape, pixels.shape[1], dtype=torch.long)}


# The input each modality of `input_modalities` stands for, in the order forward takes them.
MODALITY_INPUTS = {"text": ("input_ids",), "image": ("pixel_values",),
                   "audio": ("input_features", "input_values"),
                   "video": ("pixel_values_videos", "pixel_values"), "time": ("past_values",)}


BOX_RANGE = 1000  # layout models normalize page coordinates to 0..1000


def boxes(config, shape, gen: torch.Generator) -> torch.Tensor:
    """One box (x0, y0, x1, y1) per token, x0 <= x1 and y0 <= y1, inside the page coordinates
    the config's 2-D position embeddings cover."""
    limit = min(BOX_RANGE, (config_value(config, "max_2d_position_embeddings") or BOX_RANGE) - 1)
    corners = torch.randint(limit + 1, (*shape, 2, 2), generator=gen).sort(dim=-2).values
    return corners.reshape(*shape, 4)  # the smaller corner (x0, y0), then (x1, y1)


FEATURE_MASKS = ("input_features_mask", "feature_attention_mask")


def _all_frames_valid(config, features: torch.Tensor) -> torch.Tensor:
    """input_features_mask, documented as (batch, frames), 1 for valid mel frames: all valid.
    The frames are the axis that is not the config's feature size."""
    size = config_value(config, "num_mel_bins", "feature_size", "input_feat_per_channel", "input_dim")
    frames = features.shape[-1] if features.shape[1] == size else features.shape[1]
    return torch.ones(features.shape[0], frames, dtype=torch.long)


def modality_inputs(model, gen: torch.Generator, layout: str = LAYOUTS[0]) -> dict[str, torch.Tensor]:
    """An input for every modality the model declares (`input_modalities`) that its forward
    takes by name: dual encoders (CLIP-like) need text and image together; a layout model's
    boxes where forward takes `bbox`, the first language where it takes `lang_ids`, vectors
    for inputs the config sizes by name (`visual_feats` by `visual_feat_dim`); then any input
    forward requires that has a recipe (a Q-Former's own token ids)."""
    inputs: dict[str, torch.Tensor] = {}
    modalities = declared_modalities(model)
    for modality in modalities:
        if modality == "video" and "image" in modalities:
            continue  # image-and-video models take clips only beside tokens that place them
        for name in MODALITY_INPUTS.get(modality, ()):
            if named(model, name) and name not in inputs:
                inputs.update(main_input(model, gen, name, layout))
                break
    if named(model, "bbox") and "input_ids" in inputs:
        inputs["bbox"] = boxes(model.config, inputs["input_ids"].shape, gen)
    if named(model, "lang_ids") and "input_ids" in inputs:  # the first language's adapters
        inputs["lang_ids"] = torch.zeros(inputs["input_ids"].shape[0], dtype=torch.long)
    for name in inspect.signature(model.forward).parameters:
        if name not in inputs and isinstance(feature_width(model.config, name), int):
            inputs.update(main_input(model, gen, name, layout))
    if "input_features" in inputs:  # a mask of valid frames, which forward may read unchecked
        for name in FEATURE_MASKS:
            if named(model, name):
                inputs[name] = _all_frames_valid(model.config, inputs["input_features"])
    for name in required_params(model):
        if name not in inputs:
            try:
                inputs.update(main_input(model, gen, name, layout, inputs))
            except NoInputRecipe:
                documented = documented_input(model, name, inputs, gen)
                if documented is not None:  # else forward names what it misses (the cause)
                    inputs[name] = documented
    return inputs


def _image_feature_count(model, inputs: dict[str, torch.Tensor]) -> int | None:
    """How many feature vectors the model makes of one image: its own get_image_features on
    the inputs it names (a Q-Former's query count, a projector's patches), counted per image."""
    get = getattr(model, "get_image_features", None)
    if get is None or "pixel_values" not in inputs:
        return None
    names = inspect.signature(get).parameters
    try:
        with torch.no_grad():
            out = get(**{k: v for k, v in inputs.items() if k in names and k != "input_ids"})
    except Exception:  # noqa: BLE001 - the forward then says what it misses
        return None
    features = getattr(out, "pooler_output", None) if not isinstance(out, (torch.Tensor, tuple, list)) \
        else out
    if features is None and hasattr(out, "last_hidden_state"):
        features = out.last_hidden_state
    parts = [t for _, t in _leaves(features)]
    if not parts:
        return None
    vectors = sum(t.numel() // t.shape[-1] for t in parts)
    batch = inputs["pixel_values"].shape[0]
    return vectors // batch if vectors % batch == 0 else None


def _leaves(obj, prefix: str = ""):
    if isinstance(obj, torch.Tensor):
        return [(prefix, obj)]
    if isinstance(obj, (list, tuple)):
        return [t for i, v in enumerate(obj) for t in _leaves(v, f"{prefix}[{i}]")]
    return []


def _image_placeholders(model, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Token ids beside an image hold one placeholder (the config's image token) per feature
    vector the model makes of the image, as its processor writes them, ahead of the text; a
    model that marks those places with `image_embeds_position_mask` instead (Kosmos-2) gets
    ordinary tokens there (the text's first) and the mask 1 on them, 0 on the text."""
    image_token = config_value(model.config, "image_token_id", "image_token_index")
    position_mask = named(model, "image_embeds_position_mask")
    if not (isinstance(image_token, int) or position_mask) or "input_ids" not in inputs:
        return inputs
    count = _image_feature_count(model, inputs)
    if not count:
        return inputs
    ids = inputs["input_ids"]
    out = dict(inputs)
    places = ids[:, :1].repeat(1, count) if position_mask \
        else torch.full((ids.shape[0], count), image_token, dtype=ids.dtype)
    out["input_ids"] = torch.cat([places, ids], 1)
    if position_mask:
        out["image_embeds_position_mask"] = torch.cat(
            [torch.ones_like(places), torch.zeros_like(ids)], 1)
    if "attention_mask" in out:
        out["attention_mask"] = torch.ones_like(out["input_ids"])
    return out


# Which inputs the battery gives, tried in this order (check.build_tiny records the index as
# `every_modality`): the main input alone; one input per declared modality besides (and the
# required ones); every input forward documents besides, for models whose optional inputs are
# not optional in practice (a Q-Former's encoder states, a decision transformer's actions).
INPUT_SETS = ("main input", "every modality", "every documented input")
EVERY_DOCUMENTED = INPUT_SETS.index("every documented input")

# Parameters the documented set leaves out: labels and caches, switches, alternatives to an
# input already given (`inputs_embeds` beside input_ids, `image_embeds` beside pixels) and
# ids the model derives itself.
_NOT_AN_INPUT = re.compile(r"^(labels|past_key_values|cache_\w+|use_\w+|output_\w+|return_\w+|"
                           r"\w*head_mask|\w*_embeds|position_ids|token_type_ids|logits_to_keep)$")


def documented_inputs(model, inputs: dict[str, torch.Tensor], gen: torch.Generator,
                      layout: str = LAYOUTS[0]) -> dict[str, torch.Tensor]:
    """Every forward parameter not given yet that has a recipe or a documented shape."""
    out = dict(inputs)
    for name, p in inspect.signature(model.forward).parameters.items():
        if name in out or _NOT_AN_INPUT.match(name) or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        try:
            out.update({k: v for k, v in main_input(model, gen, name, layout, out).items()
                        if k not in out})
        except NoInputRecipe:
            documented = documented_input(model, name, out, gen)
            if documented is not None:
                out[name] = documented
    return out


def forward_inputs(model, head: str, gen: torch.Generator, every_modality: int = 0,
                   layout: str = LAYOUTS[0]) -> dict[str, torch.Tensor]:
    """Main input plus what an encoder-decoder's forward needs (decoder ids); with
    `every_modality` (an index into INPUT_SETS; True is "every modality"), an input for each
    declared modality besides, and at EVERY_DOCUMENTED every documented input (there, a main
    input without a recipe is left out where forward takes others); audio in `layout`."""
    try:
        inputs = main_input(model, gen, layout=layout)
    except NoInputRecipe:
        if every_modality < EVERY_DOCUMENTED:
            raise
        inputs = {}  # a main input with no recipe ("anything" to a Perceiver): the others alone
    if every_modality:
        inputs.update({k: v for k, v in modality_inputs(model, gen, layout).items()
                       if k not in inputs})
        if every_modality >= EVERY_DOCUMENTED:
            inputs = documented_inputs(model, inputs, gen, layout)
        inputs = _image_placeholders(model, inputs)
        inputs = _images_each_token_sees(model, inputs)
    if "attention_mask" in inputs and not named(model, "attention_mask"):
        del inputs["attention_mask"]
    if getattr(model.config, "is_encoder_decoder", False) and named(model, "decoder_input_ids"):
        inputs["decoder_input_ids"] = token_ids(model.config, (BATCH, DECODER_SEQ), gen)
    return inputs


def labels(model, head: str, inputs: dict[str, torch.Tensor], gen: torch.Generator):
    """Labels for the head's own loss, or None where the battery uses a generic loss instead."""
    if not named(model, "labels"):
        return None
    config = model.config
    if head in ("causal_lm", "masked_lm") and "input_ids" in inputs:
        return inputs["input_ids"].clone()
    if head == "seq2seq_lm":
        if "decoder_input_ids" in inputs:
            return inputs["decoder_input_ids"].clone()
        return token_ids(config, (BATCH, DECODER_SEQ), gen)
    num_labels = getattr(config, "num_labels", 2)
    if head == "sequence_classification":
        return torch.randint(num_labels, (BATCH,), generator=gen)
    if head == "token_classification" and "input_ids" in inputs:
        return torch.randint(num_labels, inputs["input_ids"].shape, generator=gen)
    if head == "ctc":
        return torch.randint(1, vocab_size(config), (BATCH, 3), generator=gen)
    return None
