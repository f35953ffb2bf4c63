"""A config that names a timm architecture (a vision tower built by timm at full size: FastVLM's
FastViT, Gemma 3n's MobileNetV5, the Perception Encoder's ViT) gets one of timm's tiny test
models with features of the same layout, and the widths given for the full tower follow it; a
model that asks for a timm name its config leaves unset (TimmBackbone) gets a tiny one. timm
installs only in the torch 2.14 environment (.venv-214): the main environment skips these."""

import copy

import pytest

pytest.importorskip("transformers")
pytest.importorskip("timm")

import torch  # noqa: E402
import transformers  # noqa: E402

import torchneuron  # noqa: E402,F401 - registers the neuron device
from torchneuron.compat.models import timm_features, timm_models  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402
from torchneuron.compat.models.tiny_sizes import IMAGE_SIZE  # noqa: E402


def _runs_on_neuron_as_on_the_cpu(model, **inputs):
    model.eval()
    with torch.no_grad():
        expected = model(**inputs)
        got = copy.deepcopy(model).to("neuron")(**{k: v.to("neuron") for k, v in inputs.items()})
    assert expected.last_hidden_state is not None
    torch.testing.assert_close(got.last_hidden_state.cpu(), expected.last_hidden_state)


def _pixels():
    return torch.randn(2, 3, IMAGE_SIZE, IMAGE_SIZE, generator=torch.Generator().manual_seed(0))


def test_a_full_size_tower_becomes_a_tiny_one_of_the_same_layout():
    assert timm_models.features("fastvit_mci3")[:2] == (timm_models.MAP, 3072)
    assert timm_models.features("vit_pe_core_large_patch14_336")[:2] == (timm_models.TOKENS, 1024)
    tiny_map = timm_models.tiny_like("fastvit_mci3")
    tiny_tokens = timm_models.tiny_like("vit_pe_core_large_patch14_336")
    assert tiny_map.startswith("test_") and tiny_tokens.startswith("test_")
    assert timm_models.features(tiny_map, IMAGE_SIZE)[0] == timm_models.MAP
    assert timm_models.features(tiny_tokens, IMAGE_SIZE)[0] == timm_models.TOKENS
    assert timm_models.tiny_like("resnet50") == "test_resnet"  # the same timm module first
    assert timm_models.tiny_like("not_a_timm_model") is None


def test_the_width_given_for_the_full_tower_follows_the_tiny_one():
    config = tiny_config("fast_vlm")
    vision = config.vision_config
    layout, width, _, parameters = timm_models.features(vision.architecture, IMAGE_SIZE)
    assert layout == timm_models.MAP and parameters < 1_000_000
    assert vision.hidden_size == width  # the projector into the text model reads this width
    assert "inference_mode" not in (vision.model_args or {})  # FastViT's own setting goes


def test_settings_the_tiny_model_does_not_take_go_and_the_others_stay():
    assert timm_models._accepted("test_efficientnet", {"inference_mode": True, "drop_rate": 0.0}) \
        == {"drop_rate": 0.0}


def test_a_config_without_a_timm_name_is_left_as_it_is():
    full = {"architecture": "not_a_timm_model", "hidden_size": 3072, "sub": {"hidden_size": 8}}
    small = copy.deepcopy(full)
    timm_models.replace_architectures(full, small)
    assert small == full


def test_gemma3n_vision_tower_runs_on_neuron_as_on_the_cpu():
    torch.manual_seed(0)
    model = transformers.TimmWrapperModel(tiny_config("gemma3n_vision"))
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    _runs_on_neuron_as_on_the_cpu(model, pixel_values=_pixels())


def test_an_unset_timm_name_the_model_asks_for_is_given():
    config = tiny_config("timm_backbone")
    with pytest.raises(ValueError, match="timm model name") as e:
        transformers.TimmBackbone(config)
    assert timm_models.give_unset_timm_name(config, e.value)
    assert timm_models.features(config.backbone, IMAGE_SIZE)[0] == timm_models.MAP
    assert not timm_models.give_unset_timm_name(config, e.value)  # set now: nothing to give
    torch.manual_seed(0)
    model = transformers.TimmBackbone(config).eval()
    with torch.no_grad():
        expected = model(pixel_values=_pixels())
        got = copy.deepcopy(model).to("neuron")(pixel_values=_pixels().to("neuron"))
    torch.testing.assert_close(got.feature_maps[-1].cpu(), expected.feature_maps[-1])


def test_another_error_gives_no_timm_name():
    config = tiny_config("timm_backbone")
    assert not timm_models.give_unset_timm_name(config, ValueError("backbone is too big"))
    assert config.backbone is None


def test_channels_per_level_follow_a_features_only_tower():
    config = tiny_config("edgetam_vision_model")
    args = config.backbone_config.model_args
    assert args["features_only"] and args["out_indices"] == [0, 1, 2, 3]  # timm's, not shrunk
    channels = timm_features.feature_channels(config.backbone_config.architecture, args)
    assert config.backbone_channel_list == channels[::-1]  # deepest first, as the defaults
    assert timm_features.feature_channels("not_a_timm_model", args) is None


def test_edgetam_vision_tower_runs_on_neuron_as_on_the_cpu():
    torch.manual_seed(0)
    model = transformers.EdgeTamVisionModel(tiny_config("edgetam_vision_model"))
    _runs_on_neuron_as_on_the_cpu(model, pixel_values=_pixels())
