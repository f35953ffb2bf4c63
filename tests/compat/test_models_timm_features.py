"""Sizes beside a features_only timm tower follow the tiny tower that replaces it: EdgeTAM's
per-level map sizes are the image over the tiny tower's reductions, and its prompt encoder's
patch grid stays the size of the coarsest map it adds its prompts to; a model that reads a
timm argument its tower's model_args leave out (Perception LM's embed_dim) gets the smallest
tiny model with that argument. The config rules run anywhere; building the models needs timm,
which installs only in the torch 2.14 environment (.venv-214)."""

import copy
import importlib.util

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

import torchneuron  # noqa: E402,F401 - registers the neuron device
from torchneuron.compat.models import timm_features  # noqa: E402
from torchneuron.compat.models.tiny_sizes import IMAGE_SIZE  # noqa: E402

needs_timm = pytest.mark.skipif(importlib.util.find_spec("timm") is None,
                                reason="timm installs only in .venv-214")


def test_a_patch_grid_that_matched_a_map_follows_its_new_side():
    full = {"prompt": {"image_size": 1024, "patch_size": 16}, "other": {"image_size": 1024,
                                                                        "patch_size": 14}}
    small = {"prompt": {"image_size": 32, "patch_size": 4}, "other": {"image_size": 32,
                                                                      "patch_size": 4}}
    timm_features.follow_patch_grid(full, small, {256: 16, 128: 8, 64: 4})
    assert small["prompt"]["patch_size"] == 8  # 32 // 8 = 4: the coarsest map's new side
    assert small["other"]["patch_size"] == 4  # 1024 // 14 matched no map: left as shrunk


def test_only_lists_of_halving_height_width_pairs_are_map_sizes():
    assert timm_features._pair_sizes([[256, 256], [128, 128], [64, 64]])
    assert timm_features._pair_sizes([[64, 64], [128, 128]])
    assert not timm_features._pair_sizes([[256, 256], [100, 100]])
    assert not timm_features._pair_sizes([[256, 256]])
    assert not timm_features._pair_sizes([256, 128])


def _pixels():
    return torch.randn(2, 3, IMAGE_SIZE, IMAGE_SIZE, generator=torch.Generator().manual_seed(0))


@needs_timm
def test_edgetam_maps_and_prompt_grid_follow_the_tiny_tower_and_it_runs_on_neuron():
    import transformers

    from torchneuron.compat.models.tiny_config import tiny_config

    config = tiny_config("edgetam")
    vision = config.vision_config
    info = timm_features.feature_info(vision.backbone_config.architecture,
                                      vision.backbone_config.model_args)
    sides = [IMAGE_SIZE // level["reduction"] for level in info[:3]]
    assert vision.backbone_feature_sizes == [[s, s] for s in sides]
    prompt = config.prompt_encoder_config
    assert prompt.image_size // prompt.patch_size == sides[-1]
    torch.manual_seed(0)
    model = transformers.EdgeTamModel(config).eval()
    with torch.no_grad():
        expected = model(pixel_values=_pixels())
        got = copy.deepcopy(model).to("neuron")(pixel_values=_pixels().to("neuron"))
    torch.testing.assert_close(got.pred_masks.cpu(), expected.pred_masks)
    torch.testing.assert_close(got.iou_scores.cpu(), expected.iou_scores)


@needs_timm
def test_a_timm_argument_the_model_reads_gets_a_tiny_tower_that_has_it():
    import transformers

    from torchneuron.compat.models import timm_models
    from torchneuron.compat.models.tiny_config import tiny_config

    config = tiny_config("perception_lm")
    assert config.vision_config.model_args == {}  # unset in the defaults: now reads name a key
    with pytest.raises(KeyError) as e:
        transformers.PerceptionLMForConditionalGeneration(config)
    assert not timm_models.give_read_model_arg(config, KeyError("no_tiny_model_has_this"))
    assert not timm_models.give_read_model_arg(config, ValueError("embed_dim"))
    assert config.vision_config.model_args == {}  # nothing given for those
    assert timm_models.give_read_model_arg(config, e.value)
    name, width = timm_models.tiny_with("embed_dim")
    assert config.vision_config.architecture == name
    assert config.vision_config.model_args == {"embed_dim": width}
    assert timm_models.features(name, IMAGE_SIZE)[0] == timm_models.TOKENS
    torch.manual_seed(0)
    model = transformers.PerceptionLMModel(config).eval()
    with torch.no_grad():
        pixels = _pixels().unsqueeze(1)  # (batch, images, channels, height, width)
        expected = model.get_image_features(pixel_values=pixels).pooler_output
        got = copy.deepcopy(model).to("neuron").get_image_features(
            pixel_values=pixels.to("neuron")).pooler_output
    torch.testing.assert_close(got.cpu(), expected)
