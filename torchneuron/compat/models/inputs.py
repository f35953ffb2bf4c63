"""Inputs for a tiny model, derived from its `main_input_name` and its config (never from a
hand-written per-model list), plus the labels its head's training loss takes. Everything is
made on the CPU from a fixed seed; the neuron run gets copies."""

from __future__ import annotations

import functools
import inspect
import re

import torch

from .input_widths import with_input_widths
from .shrink import special_token_ids

BATCH = 2
SEQ = 8
DECODER_SEQ = 5
AUDIO_SAMPLES = 4000
FEATURE_FRAMES = 64
VIDEO_FRAMES = 4  # where the config does not say how many frames a clip has
SERIES_LENGTH = 64  # where the config does not say how long a series' context is


class NoInputRecipe(Exception):
    """The model's main input is of a kind the battery cannot make from its config."""


_PARTS = ("vision_config", "audio_config", "encoder_config", "text_config", "encoder", "decoder",
          "decoder_config", "language_config", "llm_config", "thinker_config", "text_encoder",
          "backbone_config", "model_config")


def _parts(config):
    """The config, its usual parts in _PARTS' order, then any other sub-config it holds (a
    codec's semantic_model_config, a transcriber's asr_config)."""
    listed = [getattr(config, p, None) for p in _PARTS]
    others = [v for k, v in sorted(vars(config).items()) if k not in _PARTS and hasattr(v, "to_dict")
              and v is not config] if hasattr(config, "__dict__") else []
    return (config, *listed, *others)


def _sub(config, *names):
    """The first attribute among `names` on the config or on its parts (_parts)."""
    for part in _parts(config):
        if part is None:
            continue
        for name in names:
            value = getattr(part, name, None)
            if value is not None:
                return value
    return None


BYTE_VALUES = 256


def vocab_size(config) -> int:
    """The config's vocabulary; a config that names none anywhere embeds characters (CANINE
    hashes Unicode code points), whose inputs are given as byte values."""
    v = _sub(config, "vocab_size")
    if isinstance(v, int):
        return v
    if not _names_a_vocabulary(config.to_dict()):
        return BYTE_VALUES
    raise NoInputRecipe("config has no vocab_size for input_ids")


def _names_a_vocabulary(d: dict) -> bool:
    # token type ids (type_vocab_size) are not a vocabulary of tokens
    return any(isinstance(k, str) and "vocab" in k and k != "type_vocab_size"
               or isinstance(v, dict) and _names_a_vocabulary(v) for k, v in d.items())


def token_ids(config, shape, gen: torch.Generator) -> torch.Tensor:
    """Ordinary token ids: inside the vocabulary, avoiding every special id the config names."""
    vocab = vocab_size(config)
    specials = special_token_ids(config)
    allowed = torch.tensor([i for i in range(vocab) if i not in specials])
    if len(allowed) == 0:
        raise NoInputRecipe("every id of the vocabulary is a special token")
    return allowed[torch.randint(len(allowed), shape, generator=gen)]


IMAGE_SIZE_KEYS = ("image_size", "input_size", "img_size")


def names_no_image_size(config) -> bool:
    return _sub(config, *IMAGE_SIZE_KEYS) is None


def _image_size(config) -> tuple[int, int]:
    size = _sub(config, *IMAGE_SIZE_KEYS)
    if isinstance(size, int):
        return size, size
    if isinstance(size, (list, tuple)) and len(size) >= 2:
        return int(size[-2]), int(size[-1])
    return 32, 32


def _main_input_name(model) -> str:
    """`main_input_name`, unless forward does not take it (a vision tower that inherits the
    default "input_ids"): then forward's first parameter, the input it documents first."""
    params = [p for p in inspect.signature(model.forward).parameters.values()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY)]
    names = [p.name for p in params]
    if model.main_input_name in names or not names:
        return model.main_input_name
    return names[0]


def _modalities(model) -> tuple[str, ...]:
    modalities = getattr(model, "input_modalities", ()) or ()
    return (modalities,) if isinstance(modalities, str) else tuple(modalities)


def _is_video(model) -> bool:
    """Whether `pixel_values` are clips: the config says how many frames a clip has, or video is
    the only visual modality the model declares."""
    modalities = _modalities(model)
    frames = _sub(model.config, "num_frames", "frames_per_clip")
    return isinstance(frames, int) or ("video" in modalities and "image" not in modalities)


def _pixels(config, gen: torch.Generator, frames: int | None) -> torch.Tensor:
    channels = _sub(config, "num_channels", "in_channels", "in_chans") or 3
    h, w = _image_size(config)
    if frames is None:
        return torch.randn(BATCH, channels, h, w, generator=gen)
    return torch.randn(BATCH, frames, channels, h, w, generator=gen)  # Hugging Face's layout


def _frames(config) -> int:
    frames = _sub(config, "num_frames", "frames_per_clip")
    return frames if isinstance(frames, int) else VIDEO_FRAMES


def _past_length(config) -> int:
    """How many past steps a series gives: the context, plus the largest lag where the model
    takes lagged copies of it (documented as context_length + max(lags_sequence))."""
    length = _sub(config, "context_length")
    length = length if isinstance(length, int) else SERIES_LENGTH
    lags = _sub(config, "lags_sequence")
    return length + max(lags) if isinstance(lags, (list, tuple)) and lags else length


def _series(config, gen: torch.Generator) -> torch.Tensor:
    """A time series' past values: (batch, past length) or (batch, past length, channels)
    where the config names its channels."""
    length = _past_length(config)
    channels = _sub(config, "num_input_channels")
    shape = (BATCH, length, channels) if isinstance(channels, int) else (BATCH, length)
    return torch.randn(*shape, generator=gen)


def _series_companion(config, name: str, gen: torch.Generator) -> torch.Tensor:
    """What comes beside past values: which steps were observed (all of them), and the time
    features of each step (num_time_features + num_dynamic_real_features per step)."""
    if name == "past_observed_mask":
        return torch.ones(_series(config, torch.Generator()).shape)
    features = sum(_sub(config, k) or 0 for k in ("num_time_features", "num_dynamic_real_features"))
    return torch.randn(BATCH, _past_length(config), features, generator=gen)


def _patches_on_a_grid(model, name: str, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Vision towers of Qwen-VL-like models take images already cut into flattened patches
    (temporal x channel x patch x patch values each) with each image's grid (t, h, w) in
    patches; the grid's sides are a multiple of the tower's merge size."""
    config = model.config
    merge = _sub(config, "spatial_merge_size", "merge_kernel_size", "merge_size") or 1
    merge = merge[0] if isinstance(merge, (list, tuple)) else merge
    channels = _sub(config, "in_channels", "num_channels", "in_chans") or 3
    patch = _sub(config, "patch_size") or 14
    temporal = _sub(config, "temporal_patch_size", "patch_temporal") or 1
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
    channels = _sub(config, "num_channels", "in_channels") or 3
    patch = _sub(config, "patch_size") or 16
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
    patch = _sub(model.config, "patch_size")
    if not isinstance(patch, int) or not any(k.endswith("grid_thw") for k in inputs):
        return inputs
    out = dict(inputs)
    for name, x in inputs.items():
        if x.dim() == 2 and x.is_floating_point() and x.shape[1] % (patch * patch) == 0:
            out[name] = x.reshape(x.shape[0], -1, patch, patch)
    return out


def _images_each_token_sees(model, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Beside several images per sample and token ids, an `image_attention_mask` forward takes
    without a documented shape says which images each token sees, (batch, tokens, images)
    (IDEFICS' cross-attention): every token sees every image."""
    pixels, ids = inputs.get("pixel_values"), inputs.get("input_ids")
    if pixels is None or ids is None or pixels.dim() != 5 or "image_attention_mask" in inputs \
            or not _named(model, "image_attention_mask") \
            or _documented_shape(model, "image_attention_mask") is not None:
        return inputs
    return {**inputs, "image_attention_mask": torch.ones(*ids.shape, pixels.shape[1], dtype=torch.long)}


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
    if _named(model, "pixel_attention_mask") and _documented_shape(model, "pixel_attention_mask") is None:
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
    codebooks = _sub(model.config, "num_codebooks")
    if not isinstance(codebooks, int) or "input_ids" not in inputs:
        return inputs
    ids = token_ids(model.config, (BATCH * codebooks, SEQ), gen)
    out = {**inputs, "input_ids": ids}
    if "attention_mask" in out:
        out["attention_mask"] = torch.ones(BATCH, SEQ, dtype=ids.dtype)
    return out


def _main_input(model, gen: torch.Generator, name: str | None = None,
                known: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    config, name = model.config, name or _main_input_name(model)
    if name in ("hidden_states", "pixel_values") and _named(model, "grid_thw"):
        return _patches_on_a_grid(model, name, gen)
    if name == "pixel_values" and _named(model, "spatial_shapes"):
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
        width = _sub(config, "hidden_size", "d_model", "latent_dim", "embed_dim")
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
        channels = _sub(config, "audio_channels")
        if isinstance(channels, int):  # codecs take (batch, channels, samples)
            return {name: torch.randn(BATCH, channels, AUDIO_SAMPLES, generator=gen)}
        return {name: torch.randn(BATCH, AUDIO_SAMPLES, generator=gen)}
    if name == "input_features" or name.endswith("_mel"):  # log-mel features by any name
        mel_bins = _sub(config, "num_mel_bins")
        source_positions = _sub(config, "max_source_positions")
        if isinstance(mel_bins, int) and isinstance(source_positions, int):
            # Whisper-style encoders: (batch, mel bins, 2 frames per encoder position).
            return {name: torch.randn(BATCH, mel_bins, 2 * source_positions, generator=gen)}
        per_frame = _sub(config, "input_feat_per_channel", "feature_size", "num_mel_bins",
                         "input_dim", "input_feat_size", "feature_projection_input_dim")
        if isinstance(per_frame, int):
            channels = _sub(config, "input_channels") or 1
            return {name: torch.randn(BATCH, FEATURE_FRAMES, per_frame * channels, generator=gen)}
        raise NoInputRecipe("input_features without a feature size in the config")
    if isinstance(_feature_width(config, name), int):  # vectors sized by `<name>_dim`
        return {name: torch.randn(BATCH, SEQ, _feature_width(config, name), generator=gen)}
    if isinstance(_padded_vector_width(config, name), int):  # one vector per sample
        return {name: torch.randn(BATCH, _padded_vector_width(config, name), generator=gen)}
    documented = documented_input(model, name, known or {}, gen)  # its documented shape
    if documented is not None:
        return {name: documented}
    raise NoInputRecipe(f"no recipe for main input {name!r}")


def accepts(model, name: str) -> bool:
    params = inspect.signature(model.forward).parameters
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _named(model, name: str) -> bool:
    return name in inspect.signature(model.forward).parameters


# The input each modality of `input_modalities` stands for, in the order forward takes them.
MODALITY_INPUTS = {"text": ("input_ids",), "image": ("pixel_values",),
                   "audio": ("input_features", "input_values"),
                   "video": ("pixel_values_videos", "pixel_values"), "time": ("past_values",)}


def _required(model) -> list[str]:
    """Forward's parameters without a default: what it cannot run without."""
    return [p.name for p in inspect.signature(model.forward).parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


BOX_RANGE = 1000  # layout models normalize page coordinates to 0..1000


def boxes(config, shape, gen: torch.Generator) -> torch.Tensor:
    """One box (x0, y0, x1, y1) per token, x0 <= x1 and y0 <= y1, inside the page coordinates
    the config's 2-D position embeddings cover."""
    limit = min(BOX_RANGE, (_sub(config, "max_2d_position_embeddings") or BOX_RANGE) - 1)
    corners = torch.randint(limit + 1, (*shape, 2, 2), generator=gen).sort(dim=-2).values
    return corners.reshape(*shape, 4)  # the smaller corner (x0, y0), then (x1, y1)


def _feature_width(config, name: str):
    """The width the config gives an input of vectors by its name: `visual_feats` is sized by
    `visual_feat_dim`, `visual_pos` by `visual_pos_dim` (LXMERT)."""
    for key in (f"{name}_dim", f"{name[:-1]}_dim" if name.endswith("s") else None):
        if key and isinstance(getattr(config, key, None), int):
            return getattr(config, key)
    return None


def _padded_vector_width(config, name: str):
    """The width of an input the config bounds as `max_<name>_dim`: one vector per sample,
    zero-padded to that width (PI0's robot `state`, documented "maximum dimension of state
    vectors")."""
    width = getattr(config, f"max_{name}_dim", None)
    return width if isinstance(width, int) and not isinstance(width, bool) else None


FEATURE_MASKS = ("input_features_mask", "feature_attention_mask")


def _all_frames_valid(config, features: torch.Tensor) -> torch.Tensor:
    """input_features_mask, documented as (batch, frames), 1 for valid mel frames: all valid.
    The frames are the axis that is not the config's feature size."""
    size = _sub(config, "num_mel_bins", "feature_size", "input_feat_per_channel", "input_dim")
    frames = features.shape[-1] if features.shape[1] == size else features.shape[1]
    return torch.ones(features.shape[0], frames, dtype=torch.long)


def modality_inputs(model, gen: torch.Generator, layout: str = LAYOUTS[0]) -> dict[str, torch.Tensor]:
    """An input for every modality the model declares (`input_modalities`) that its forward
    takes by name: dual encoders (CLIP-like) need text and image together; a layout model's
    boxes where forward takes `bbox`, the first language where it takes `lang_ids`, vectors
    for inputs the config sizes by name (`visual_feats` by `visual_feat_dim`); then any input
    forward requires that has a recipe (a Q-Former's own token ids)."""
    inputs: dict[str, torch.Tensor] = {}
    modalities = _modalities(model)
    for modality in modalities:
        if modality == "video" and "image" in modalities:
            continue  # image-and-video models take clips only beside tokens that place them
        for name in MODALITY_INPUTS.get(modality, ()):
            if _named(model, name) and name not in inputs:
                inputs.update(main_input(model, gen, name, layout))
                break
    if _named(model, "bbox") and "input_ids" in inputs:
        inputs["bbox"] = boxes(model.config, inputs["input_ids"].shape, gen)
    if _named(model, "lang_ids") and "input_ids" in inputs:  # the first language's adapters
        inputs["lang_ids"] = torch.zeros(inputs["input_ids"].shape[0], dtype=torch.long)
    for name in inspect.signature(model.forward).parameters:
        if name not in inputs and isinstance(_feature_width(model.config, name), int):
            inputs.update(main_input(model, gen, name, layout))
    if "input_features" in inputs:  # a mask of valid frames, which forward may read unchecked
        for name in FEATURE_MASKS:
            if _named(model, name):
                inputs[name] = _all_frames_valid(model.config, inputs["input_features"])
    for name in _required(model):
        if name not in inputs:
            try:
                inputs.update(main_input(model, gen, name, layout, inputs))
            except NoInputRecipe:
                documented = documented_input(model, name, inputs, gen)
                if documented is not None:  # else forward names what it misses (the cause)
                    inputs[name] = documented
    return inputs


# A documented argument: "past_values_padding (`torch.LongTensor` of shape `(batch_size,
# sequence_length)`):" in forward's docstring (transformers writes one for every model).
_DOCUMENTED = r"^\s*{name} \(`(?P<type>[^`]*)` of shape `\((?P<shape>[^)]*)\)`"
_BATCH_DIMS = {"batch_size", "num_images", "num_images_or_videos", "batch"}


def _documented_shape(model, name: str) -> tuple[str, list[str]] | None:
    match = re.search(_DOCUMENTED.format(name=re.escape(name)), model.forward.__doc__ or "", re.M)
    if not match:
        return None
    return match["type"], [d.strip() for d in match["shape"].split(",") if d.strip()]


def _config_size(model, dim: str) -> int | None:
    value = _sub(model.config, dim) if getattr(model, "config", None) is not None else None
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
    documented = _documented_shape(model, name)
    if documented is None:
        return None
    kind, dims = documented
    sizes: dict[str, int] = {}
    for other, value in inputs.items():
        known = _documented_shape(model, other)
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
        elif dim == "sequence_length" and _modalities(model) == ("audio",) and "Tensor" in kind \
                and "Long" not in kind and "Bool" not in kind:
            shape.append(AUDIO_SAMPLES)  # a waveform (a speech encoder-decoder's `inputs`)
        elif dim == "sequence_length":  # a sequence of its own: the config's length for it
            prefix = re.sub(r"_(inputs|ids|values)$", "", name)  # (OneFormer's task_seq_len)
            length = _sub(model.config, f"{prefix}_seq_len", f"{prefix}_sequence_length")
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
    image_token = _sub(model.config, "image_token_id", "image_token_index")
    position_mask = _named(model, "image_embeds_position_mask")
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
    if "attention_mask" in inputs and not _named(model, "attention_mask"):
        del inputs["attention_mask"]
    if getattr(model.config, "is_encoder_decoder", False) and _named(model, "decoder_input_ids"):
        inputs["decoder_input_ids"] = token_ids(model.config, (BATCH, DECODER_SEQ), gen)
    return inputs


def labels(model, head: str, inputs: dict[str, torch.Tensor], gen: torch.Generator):
    """Labels for the head's own loss, or None where the battery uses a generic loss instead."""
    if not _named(model, "labels"):
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
