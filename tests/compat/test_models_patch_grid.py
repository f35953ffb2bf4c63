"""Sizes the defaults tie to the vision tower's output follow it when it shrinks: a grid size
equal to the image's patches per side (SAM's prompt encoder's image_embedding_size), the tower's
output_channels equal to the other parts' hidden size, and sine-cosine position features half
that width (SAM's num_pos_feats)."""

import copy

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

import torchneuron  # noqa: E402,F401 - registers the neuron device
from torchneuron.compat.models.catalog import by_type  # noqa: E402
from torchneuron.compat.models.check import build_tiny  # noqa: E402
from torchneuron.compat.models.inputs import forward_inputs  # noqa: E402
from torchneuron.compat.models.shrink import IMAGE_SIZE, PATCH_SIZE, PROFILES, shrink_dict  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402


def test_a_size_equal_to_the_patches_per_side_follows_the_shrunk_image():
    out = shrink_dict({"image_size": 1024, "patch_size": 16, "image_embedding_size": 64,
                       "mask_input_size": 16})
    assert out["image_embedding_size"] == IMAGE_SIZE // PATCH_SIZE
    assert out["mask_input_size"] == 16  # no grid size of this image: left alone


def test_sams_vision_output_and_position_features_follow_the_decoders_width():
    config = tiny_config("sam")
    width = config.mask_decoder_config.hidden_size
    assert config.vision_config.output_channels == width == config.prompt_encoder_config.hidden_size
    assert 2 * config.vision_config.num_pos_feats == width
    assert config.prompt_encoder_config.image_embedding_size == IMAGE_SIZE // PATCH_SIZE


@pytest.mark.parametrize("model_type", ["sam", "sam_hq"])
def test_the_model_runs_on_neuron_as_on_the_cpu(model_type):
    arch = by_type(model_type)
    model, _, profile, every_modality, layout = build_tiny(arch)
    assert profile == PROFILES[0]
    inputs = forward_inputs(model, arch.head, torch.Generator().manual_seed(0), every_modality, layout)
    with torch.no_grad():
        expected = model(**inputs)
        got = copy.deepcopy(model).to("neuron")(**{k: v.to("neuron") for k, v in inputs.items()})
    torch.testing.assert_close(got.pred_masks.cpu(), expected.pred_masks)
    torch.testing.assert_close(got.iou_scores.cpu(), expected.iou_scores)
