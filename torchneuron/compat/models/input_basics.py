"""What every input recipe of the model battery reads: the battery's batch and lengths, values
found on a config or its parts (vocabulary, image size), ordinary token ids, and what forward's
signature names (its parameters, the required ones, the modalities it declares)."""

from __future__ import annotations

import inspect

import torch

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


def config_parts(config):
    """The config, its usual parts in _PARTS' order, then any other sub-config it holds (a
    codec's semantic_model_config, a transcriber's asr_config)."""
    listed = [getattr(config, p, None) for p in _PARTS]
    others = [v for k, v in sorted(vars(config).items()) if k not in _PARTS and hasattr(v, "to_dict")
              and v is not config] if hasattr(config, "__dict__") else []
    return (config, *listed, *others)


def config_value(config, *names):
    """The first attribute among `names` on the config or on its parts (config_parts)."""
    for part in config_parts(config):
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
    v = config_value(config, "vocab_size")
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
    return config_value(config, *IMAGE_SIZE_KEYS) is None


def image_size(config) -> tuple[int, int]:
    size = config_value(config, *IMAGE_SIZE_KEYS)
    if isinstance(size, int):
        return size, size
    if isinstance(size, (list, tuple)) and len(size) >= 2:
        return int(size[-2]), int(size[-1])
    return 32, 32


def main_input_name(model) -> str:
    """`main_input_name`, unless forward does not take it (a vision tower that inherits the
    default "input_ids"): then forward's first parameter, the input it documents first."""
    params = [p for p in inspect.signature(model.forward).parameters.values()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY)]
    names = [p.name for p in params]
    if model.main_input_name in names or not names:
        return model.main_input_name
    return names[0]


def declared_modalities(model) -> tuple[str, ...]:
    modalities = getattr(model, "input_modalities", ()) or ()
    return (modalities,) if isinstance(modalities, str) else tuple(modalities)


def accepts(model, name: str) -> bool:
    params = inspect.signature(model.forward).parameters
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def named(model, name: str) -> bool:
    return name in inspect.signature(model.forward).parameters


def required_params(model) -> list[str]:
    """Forward's parameters without a default: what it cannot run without."""
    return [p.name for p in inspect.signature(model.forward).parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
