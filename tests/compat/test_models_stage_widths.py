"""Staged vision towers shrink consistently across sub-configs: stage widths that start at
hidden_size grow from the shrunk one, the same widths listed elsewhere (a neck's channel list,
last stage first) follow, a width that equals another part's hidden_size follows that part,
and feature map sizes listed per level shrink with the image (SAM2's Hiera and its neck)."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from torchneuron.compat.models.follow_widths import (  # noqa: E402
    follow_other_parts_width, follow_stage_widths, scale_feature_map_sizes)
from torchneuron.compat.models.shrink import shrink_dict  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402


def test_stage_widths_grow_from_the_shrunk_hidden_size():
    out = shrink_dict({"hidden_size": 96, "embed_dim_per_stage": [96, 192, 384, 768],
                       "image_size": [1024, 1024]})
    assert out["embed_dim_per_stage"] == [64, 128, 256, 512]
    assert out["image_size"] == [32, 32]  # not a width


def test_widths_listed_again_elsewhere_and_equal_widths_follow():
    full = {"backbone": {"hidden_size": 96, "dims": [96, 192]}, "neck_channels": [192, 96],
            "fpn_hidden_size": 256, "decoder": {"hidden_size": 256}}
    small = {"backbone": {"hidden_size": 64, "dims": [64, 128]}, "neck_channels": [192, 96],
             "fpn_hidden_size": 256, "decoder": {"hidden_size": 64}}
    follow_stage_widths(full, small)
    follow_other_parts_width(full, small)
    assert small["neck_channels"] == [128, 64] and small["fpn_hidden_size"] == 64


def test_feature_map_sizes_shrink_with_the_image():
    full = {"image_size": 1024, "feature_sizes": [[256, 256], [64, 64]]}
    small = {"image_size": 32, "feature_sizes": [[256, 256], [64, 64]]}
    scale_feature_map_sizes(full, small)
    assert small["feature_sizes"] == [[8, 8], [2, 2]]


def test_tiny_sam2_vision_model_runs_forward_on_the_cpu():
    from transformers import Sam2VisionModel

    model = Sam2VisionModel(tiny_config("sam2_vision_model")).eval()
    with torch.no_grad():
        out = model(pixel_values=torch.randn(1, 3, 32, 32))
    assert all(torch.isfinite(t).all() for t in out.fpn_hidden_states)


def test_a_repeated_width_follows_the_width_it_repeats():
    d = {"encoder_hidden_dim": 256, "d_model": 256, "decoder_in_channels": [256, 256, 256]}
    assert shrink_dict(d, "every width")["decoder_in_channels"] == [64, 64, 64]
    # the first profile keeps the encoder's width, and the levels keep it too
    assert shrink_dict(d)["decoder_in_channels"] == [256, 256, 256]


def test_tiny_rt_detr_detects_with_every_backbone_level_on_the_cpu():
    from transformers import RTDetrModel

    model = RTDetrModel(tiny_config("rt_detr")).eval()
    with torch.no_grad():
        out = model(pixel_values=torch.randn(1, 3, 32, 32))
    assert torch.isfinite(out.last_hidden_state).all()
