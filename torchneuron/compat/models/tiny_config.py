"""A model type's tiny config: its default config shrunk by key-name rules under a profile
(shrink.py and the profiles' own modules), sizes that follow what shrank (follow_widths.py), then
rebuilt by the config class, whose validation errors are repaired by its own rule
(config_repairs.py). A timm tower the config names by its architecture becomes a tiny timm
model (timm_models.py)."""

from __future__ import annotations

from . import derived_again, timm_features, timm_models, unset_sizes
from .config_repairs import MAX_TIED_SIZE_REPAIRS, messages, repair_tied_size
from .follow_widths import (add_rotary_sections, follow_other_parts_width, follow_stage_widths,
                            scale_feature_map_sizes)
from .shrink import PROFILES, shrink_dict


def tiny_config(model_type: str, profile: str = PROFILES[0]):
    """The model type's config with the battery's tiny sizes. Sizes the config class ties
    together (its validation names them) take the value it asks for."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # only when building

    config_class = CONFIG_MAPPING[model_type]
    full = config_class().to_dict()
    small = shrink_dict(full, profile)
    if profile == unset_sizes.PROFILE:
        unset_sizes.give_unset_sizes(small)
    if profile == derived_again.PROFILE:
        derived_again.unset_derived_sizes(config_class, full, small)
    timm_models.replace_architectures(full, small)
    follow_stage_widths(full, small)
    timm_features.keep_backbone_channels(full, small)  # after stage widths: what timm gives
    follow_other_parts_width(full, small)
    scale_feature_map_sizes(full, small)
    add_rotary_sections(config_class, small)
    small.pop("transformers_version", None)
    small.pop("model_type", None)
    for _ in range(MAX_TIED_SIZE_REPAIRS):
        try:
            return config_class.from_dict(small)
        except Exception as e:  # noqa: BLE001 - validation errors come wrapped (strict dataclasses)
            if not repair_tied_size(small, messages(e)):
                raise
    return config_class.from_dict(small)
