"""A tiny model's main input (and the inputs made like it), derived from its `main_input_name`
and its config: token ids, pixels, clips, patches on a grid, audio samples or features, time
series, vectors of a named width; and the layouts the battery tries where configs do not tell
them apart (audio transposed, ids per codebook, the processor's image size, several images per
sample, patches as images)."""

from __future__ import annotations

import functools

import torch

from .documented_shapes import documented_input, documented_shape, masks_samples_of
from .input_basics import (AUDIO_SAMPLES, BATCH, FEATURE_FRAMES, SEQ, SERIES_LENGTH,
                           VIDEO_FRAMES, NoInputRecipe, config_value, declared_modalities,
                           image_size, main_input_name, named, token_ids)
from .input_widths import with_input_widths


def _is_video(model) -> bool:
    """Whether `pixel_values` are clips: the config says how many frames a clip has, or video is
    the only visual modality the model declares."""
    modalities = declared_modalities(model)
    frames = config_value(model.config, "num_frames", "frames_per_clip")
    return isinstance(frames, int) or ("video" in modalities and "image" not in modalities)


def _pixels(config, gen: torch.Generator, frames: int | None) -> torch.Tensor:
    channels = config_value(config, "num_channels", "in_channels", "in_chans") or 3
    h, w = image_size(config)
    if frames is None:
        return torch.randn(BATCH, channels, h, w, generator=gen)
    return torch.randn(BATCH, frames, channels, h, w, generator=gen)  # Hugging Face's layout


def _frames(config) -> int:
    frames = config_value(config, "num_frames", "frames_per_clip")
    return frames if isinstance(frames, int) else VIDEO_FRAMES


def _past_length(config) -> int:
    """How many past steps a series gives: the context, plus the largest lag where the model
    takes lagged copies of it (documented as context_length + max(lags_sequence))."""
    length = config_value(config, "context_length")
    length = length if isinstance(length, int) else SERIES_LENGTH
    lags = config_value(config, "lags_sequence")
    return length + max(lags) if isinstance(lags, (list, tuple)) and lags else length


def _series(config, gen: torch.Generator) -> torch.Tensor:
    """A time series' past values: (batch, past length) or (batch, past length, channels)
    where the config names its channels."""
    length = _past_length(config)
    channels = config_value(config, "num_input_channels")
    shape = (BATCH, length, channels) if isinstance(channels, int) else (BATCH, length)
    return torch.randn(*shape, generator=gen)


def _series_companion(config, name: str, gen: torch.Generator) -> torch.Tensor:
    """What comes beside past values: which steps were observed (all of them), and the time
    features of each step (num_time_features + num_dynamic_real_features per step)."""
    if name == "past_observed_mask":
        return torch.ones(_series(config, torch.Generator()).shape)
    features = sum(config_value(config, k) or 0 for k in ("num_time_features", "num_dynamic_real_features"))
    return torch.randn(BATCH, _past_length(config), features, generator=gen)


def _patches_on_a_grid(model, name: str, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Vision towers of Qwen-VL-like models take images already cut into flattened patches
    (temporal x channel x patch x patch values each) with each image's grid (t, h, w) in
    patches; the grid's sides are a multiple of the tower's merge size."""
    config = model.config
    merge = config_value(config, "spatial_merge_size", "merge_kernel_size", "merge_size") or 1
    merge = merge[0] if isinstance(merge, (list, tuple)) else merge
    channels = config_value(config, "in_channels", "num_channels", "in_chans") or 3
    patch = config_value(config, "patch_size") or 14
    temporal = config_value(config, "temporal_patch_size", "patch_temporal") or 1
    side = 2 * merge
    grid = torch.tensor([[1, side, side]] * BATCH)
    patches = torch.randn(BATCH * side * side, channels * temporal * patch * patch, generator=gen)
    return {name: patches, "grid_thw": grid}


# Audio comes in two layouts that configs do not tell apart: raw samples as (batch, samples) or
# with a channel axis, (batch, 1, samples), for convolutional codecs; features as (batch,
# frames, features) or Whisper's (batch, features, frames); a codec decoder's latents as
# (batch, frames, width) or (batch, width, frames). Token ids over audio codebooks come
# flattened per codebook. The battery tries the layouts in order (check.build_tiny records
# which ran).
LAYOUTS = ("as documented", "audio transposed", "ids per codebook", "processor image size",
           "images per sample", "patches as images")
IMAGES_PER_SAMPLE = 2  # a pair: what matchers take (LightGlue), and several images for the others
AUDIO_INPUTS = ("input_values", "input_features", "latents", "hidden_states")


def _audio_transposed(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = dict(inputs)
    for name in AUDIO_INPUTS:
        x = out.get(name)
        if x is None:
            continue
        if name == "input_values" and x.dim() == 2:
            out[name] = x.unsqueeze(1)  # one channel
        elif name in ("input_features", "latents", "hidden_states") and x.dim() == 3:
            out[name] = x.transpose(1, 2).contiguous()
    return out


NATIVE_SIDE = 4  # patches per side of a native-resolution image


def _native_resolution_patches(model, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Native-resolution (NaFlex) towers take images as flattened patches (channels x patch x
    patch values each) padded to a length, a mask of the real patches, and each image's
    (height, width) in patches: here a square image of NATIVE_SIDE x NATIVE_SIDE patches."""
    config = model.config
    channels = config_value(config, "num_channels", "in_channels") or 3
    patch = config_value(config, "patch_size") or 16
    count = NATIVE_SIDE * NATIVE_SIDE
    return {"pixel_values": torch.randn(BATCH, count, channels * patch * patch, generator=gen),
            "pixel_attention_mask": torch.ones(BATCH, count, dtype=torch.long),
            "spatial_shapes": torch.tensor([[NATIVE_SIDE, NATIVE_SIDE]] * BATCH)}


def main_input(model, gen: torch.Generator, name: str | None = None,
               layout: str = LAYOUTS[0], known: dict[str, torch.Tensor] | None = None
               ) -> dict[str, torch.Tensor]:
    """The model's main input (and attention mask) from its config, or the input `name`, in
    one of LAYOUTS; an input made from its documented shape reads sizes off the inputs
    `known` already (a padding indicator as long as the series beside it)."""
    inputs = _main_input(model, gen, name, known or {})
    if layout == "processor image size":
        inputs = _at_processor_size(model, inputs, gen)
    elif layout == "audio transposed":
        inputs = _audio_transposed(inputs)
    elif layout == "ids per codebook":
        inputs = _ids_per_codebook(model, inputs, gen)
    elif layout == "images per sample":
        inputs = _images_per_sample(model, inputs, gen)
    elif layout == "patches as images":
        inputs = _patches_as_images(model, inputs)
    return with_input_widths(model, inputs)  # widths the model's first projection named


def _patches_as_images(model, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Grid towers whose patch embedding is a convolution (Kimi-K2.5's) take each patch as a
    small image, (patches, channels, patch, patch), instead of flattened."""
    patch = config_value(model.config, "patch_size")
    if not isinstance(patch, int) or not any(k.endswith("grid_thw") for k in inputs):
        return inputs
    out = dict(inputs)
    for name, x in inputs.items():
        if x.dim() == 2 and x.is_floating_point() and x.shape[1] % (patch * patch) == 0:
            out[name] = x.reshape(x.shape[0], -1, patch, patch)
    return out


def _images_per_sample(model, inputs: dict[str, torch.Tensor], gen: torch.Generator):
    """Models that take several images per sample (a keypoint matcher's pair, IDEFICS'
    interleaved images, a robot policy's cameras) take pixel_values as (batch, images,
    channels, height, width); where forward takes a pixel_attention_mask it documents without
    a shape, it says which of the images are real: all of them (PI0's cameras)."""
    x = inputs.get("pixel_values")
    if x is None or x.dim() != 4:
        return inputs
    b, c, h, w = x.shape
    out = {**inputs, "pixel_values": torch.randn(b, IMAGES_PER_SAMPLE, c, h, w, generator=gen)}
    if named(model, "pixel_attention_mask") and documented_shape(model, "pixel_attention_mask") is None:
        out["pixel_attention_mask"] = torch.ones(b, IMAGES_PER_SAMPLE, dtype=torch.bool)
    return out


def _at_processor_size(model, inputs: dict[str, torch.Tensor], gen: torch.Generator):
    """Images at the size the model's image processor resizes to, for models whose config
    names no image size (a text-line recognizer takes 48 x 320, not a small square)."""
    size = processor_image_size(model.config.model_type)
    x = inputs.get("pixel_values")
    if size is None or x is None or x.dim() < 4:
        return inputs
    return {**inputs, "pixel_values": torch.randn(*x.shape[:-2], *size, generator=gen)}


@functools.lru_cache(maxsize=None)
def processor_image_size(model_type: str) -> tuple[int, int] | None:
    """(height, width) from the class defaults of the model type's image processor (`size`, or
    `crop_size` where it crops), read from its source: most processors here need torchvision,
    which cannot be imported (PyPI's build is CUDA's), but their defaults are plain literals."""
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES

    names = IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type) or {}
    names = set(names.values()) if isinstance(names, dict) else {n for n in names if n}
    for name in names:
        attrs = _processor_class_defaults(name)
        size = attrs.get("crop_size") if attrs.get("do_center_crop") else attrs.get("size")
        if isinstance(size, dict) and isinstance(size.get("height"), int) \
                and isinstance(size.get("width"), int):
            return size["height"], size["width"]
    return None


def _processor_class_defaults(class_name: str) -> dict:
    import ast
    import glob
    import os

    import transformers

    pattern = os.path.join(os.path.dirname(transformers.__file__), "models", "*", "image_processing_*.py")
    for path in glob.glob(pattern):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if f"class {class_name}(" not in text:
            continue
        for node in ast.parse(text).body:
            if isinstance(node, ast.ClassDef) and node.name == class_name:
                attrs = {}
                for st in node.body:
                    if isinstance(st, ast.Assign) and len(st.targets) == 1 \
                            and isinstance(st.targets[0], ast.Name):
                        try:
                            attrs[st.targets[0].id] = ast.literal_eval(st.value)
                        except ValueError:
                            pass  # not a literal: not a default we can read
                return attrs
    return {}


def _ids_per_codebook(model, inputs: dict[str, torch.Tensor], gen: torch.Generator):
    """Decoders over audio codebooks (MusicGen) take one row of token ids per codebook and
    batch entry: input_ids of shape (batch x num_codebooks, sequence)."""
    codebooks = config_value(model.config, "num_codebooks")
    if not isinstance(codebooks, int) or "input_ids" not in inputs:
        return inputs
    ids = token_ids(model.config, (BATCH * codebooks, SEQ), gen)
    out = {**inputs, "input_ids": ids}
    if "attention_mask" in out:
        out["attention_mask"] = torch.ones(BATCH, SEQ, dtype=ids.dtype)
    return out


def _main_input(model, gen: torch.Generator, name: str | None = None,
                known: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    config, name = model.config, name or main_input_name(model)
    if name in ("hidden_states", "pixel_values") and named(model, "grid_thw"):
        return _patches_on_a_grid(model, name, gen)
    if name == "pixel_values" and named(model, "spatial_shapes"):
        return _native_resolution_patches(model, gen)
    if name == "input_ids":
        ids = token_ids(config, (BATCH, SEQ), gen)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if name.endswith("_input_ids"):  # a second text input (a Q-Former's, a decoder's)
        return {name: token_ids(config, (BATCH, SEQ), gen)}
    if name in ("inputs_embeds", "latents", "hidden_states") \
            or name.endswith(("_embeds", "_hidden_states")):
        # Vectors in the model's width: embeddings, a decoder's latents, another tower's states
        # (a codec decoder's first parameter, standing in for the audio its main_input_name says).
        width = config_value(config, "hidden_size", "d_model", "latent_dim", "embed_dim")
        if not isinstance(width, int):
            raise NoInputRecipe(f"no width in the config for {name!r}")
        return {name: torch.randn(BATCH, SEQ, width, generator=gen)}
    if name == "pixel_values":
        return {name: _pixels(config, gen, _frames(config) if _is_video(model) else None)}
    if name == "pixel_values_videos":
        return {name: _pixels(config, gen, _frames(config))}
    if name == "past_values":
        return {name: _series(config, gen)}
    if name in ("past_observed_mask", "past_time_features"):
        return {name: _series_companion(config, name, gen)}
    if name == "input_values" and isinstance(getattr(config, "num_mel_bins", None), int) \
            and isinstance(getattr(config, "max_length", None), int):
        # A spectrogram transformer (AST): (batch, max_length frames, mel bins).
        return {name: torch.randn(BATCH, config.max_length, config.num_mel_bins, generator=gen)}
    if name == "input_values":
        channels = config_value(config, "audio_channels")
        samples = _whole_hops(model)
        if isinstance(channels, int):  # codecs take (batch, channels, samples)
            return {name: torch.randn(BATCH, channels, samples, generator=gen)}
        return {name: torch.randn(BATCH, samples, generator=gen)}
    if name == "input_features" or name.endswith("_mel"):  # log-mel features by any name
        mel_bins = config_value(config, "num_mel_bins")
        source_positions = config_value(config, "max_source_positions")
        if isinstance(mel_bins, int) and isinstance(source_positions, int):
            # Whisper-style encoders: (batch, mel bins, 2 frames per encoder position).
            return {name: torch.randn(BATCH, mel_bins, 2 * source_positions, generator=gen)}
        per_frame = config_value(config, "input_feat_per_channel", "feature_size", "num_mel_bins",
                         "input_dim", "input_feat_size", "feature_projection_input_dim")
        if isinstance(per_frame, int):
            channels = config_value(config, "input_channels") or 1
            return {name: torch.randn(BATCH, FEATURE_FRAMES, per_frame * channels, generator=gen)}
        raise NoInputRecipe("input_features without a feature size in the config")
    if isinstance(feature_width(config, name), int):  # vectors sized by `<name>_dim`
        return {name: torch.randn(BATCH, SEQ, feature_width(config, name), generator=gen)}
    if isinstance(padded_vector_width(config, name), int):  # one vector per sample
        return {name: torch.randn(BATCH, padded_vector_width(config, name), generator=gen)}
    masked = _masked_ids(name, known or {})
    if masked is not None:  # one flag per token of the ids it masks, whatever its docs say
        return {name: torch.ones_like(masked)}
    documented = documented_input(model, name, known or {}, gen)  # its documented shape
    if documented is not None:
        return {name: documented}
    raise NoInputRecipe(f"no recipe for main input {name!r}")


def _nested_value(config, name: str):
    """`name` on the config or any sub-config, however deep (PE Audio-Video's codec sits in
    its audio config's encoder config)."""
    value = getattr(config, name, None)
    if value is not None:
        return value
    for part in getattr(config, "sub_configs", None) or {}:
        sub = getattr(config, part, None)
        value = _nested_value(sub, name) if sub is not None and sub is not config else None
        if value is not None:
            return value
    return None


def _whole_hops(model) -> int:
    """The waveform's samples: the battery's count, cut to whole hops of the codec where
    forward takes a mask of those samples. The codec makes a frame per hop, and the model
    takes every hop-th sample of the mask as the frame's: only whole hops make as many mask
    values as frames (PE Audio's DAC encoder, 1920 samples a hop)."""
    hop = _nested_value(model.config, "hop_length")
    if isinstance(hop, int) and not isinstance(hop, bool) and 0 < hop <= AUDIO_SAMPLES \
            and masks_samples_of(model, "input_values"):
        return AUDIO_SAMPLES // hop * hop
    return AUDIO_SAMPLES


def _masked_ids(name: str, known: dict[str, torch.Tensor]) -> torch.Tensor | None:
    """The token ids an attention mask `<prefix>attention_mask` masks: `<prefix>input_ids`, made
    before it. OmDet-Turbo documents its `classes_attention_mask` with an axis more than its
    `classes_input_ids` have (`num_classes`, which nothing sizes), but indexes the ids with it
    row by row: a mask has the shape of its ids."""
    if not name.endswith("attention_mask"):
        return None
    return known.get(name[:-len("attention_mask")] + "input_ids")


def feature_width(config, name: str):
    """The width the config gives an input of vectors by its name: `visual_feats` is sized by
    `visual_feat_dim`, `visual_pos` by `visual_pos_dim` (LXMERT)."""
    for key in (f"{name}_dim", f"{name[:-1]}_dim" if name.endswith("s") else None):
        if key and isinstance(getattr(config, key, None), int):
            return getattr(config, key)
    return None


def padded_vector_width(config, name: str):
    """The width of an input the config bounds as `max_<name>_dim`: one vector per sample,
    zero-padded to that width (PI0's robot `state`, documented "maximum dimension of state
    vectors")."""
    width = getattr(config, f"max_{name}_dim", None)
    return width if isinstance(width, int) and not isinstance(width, bool) else None
