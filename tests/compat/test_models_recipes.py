"""How the model battery grows the set of model types it can try, from configs and the models'
own declarations rather than names: per-layer dicts follow the kept layers, every vocabulary
shrinks, a second shrink profile keeps the full-size head_dim (rotary sections are sized from
it), forward's first parameter stands in for a main_input_name it does not take, an input per
declared modality (input_modalities) feeds dual encoders; sizes a config class ties follow its
own validation, a third profile shrinks every width, and video, time series, patch grids, codec
audio and any required input with a recipe are made from the config."""

import pytest
import torch

pytest.importorskip("transformers")

from torchneuron.compat.models.catalog import by_type  # noqa: E402
from torchneuron.compat.models.check import PASS, build_tiny, check  # noqa: E402
from torchneuron.compat.models.main_input import main_input  # noqa: E402
from torchneuron.compat.models.inputs import modality_inputs  # noqa: E402
from torchneuron.compat.models.shrink import shrink_dict  # noqa: E402


def test_per_layer_dicts_follow_the_kept_layers_renumbered():
    layer_types = ["sliding"] * 5 + ["full"] + ["sliding"] * 4
    d = {"num_hidden_layers": 10, "layer_types": layer_types,
         "per_layer_config": {"05": {"head_dim": 512}, "07": {"head_dim": 256}}}
    out = shrink_dict(d)
    assert out["layer_types"] == ["sliding", "full"]  # layers 0 and 5 are kept
    assert out["per_layer_config"] == {"1": {"head_dim": 16}}  # layer 5 is now layer 1


def test_every_vocabulary_shrinks():
    out = shrink_dict({"vocab_size": 262144, "vocab_size_per_layer_input": 262144,
                       "audio_vocab": 4096, "vocab_offset": 5})
    assert out == {"vocab_size": 256, "vocab_size_per_layer_input": 256, "audio_vocab": 256,
                   "vocab_offset": 5}


def test_the_full_head_dim_profile_keeps_each_head_and_shrinks_their_number():
    d = {"hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
         "intermediate_size": 29568}
    assert shrink_dict(d, "full head_dim") == {"hidden_size": 256, "num_attention_heads": 2,
                                               "num_key_value_heads": 1, "intermediate_size": 256}
    assert shrink_dict(d)["hidden_size"] == 64  # the first profile is unchanged


def test_rotary_sections_the_defaults_leave_out_are_sized_for_the_shrunk_head():
    # qwen2_vl_text's config declares mrope_section but its defaults leave it out, and the model
    # code falls back to sections of the full-size head: the battery adds sections that sum to
    # the shrunk rotary half, so the first profile runs, and passes on neuron.
    model, _, profile, every_modality, _ = build_tiny(by_type("qwen2_vl_text"))
    assert (profile, every_modality) == ("small heads", False)
    head_dim = model.config.hidden_size // model.config.num_attention_heads
    assert sum(model.config.rope_parameters["mrope_section"]) == head_dim // 2
    rec = check(by_type("qwen2_vl_text"))
    assert (rec["forward"], rec["backward"]) == (PASS, PASS), rec["cause"]


def test_a_dual_encoder_gets_an_input_per_declared_modality():
    model, _, profile, every_modality, _ = build_tiny(by_type("altclip"))
    assert every_modality and set(model.input_modalities) == {"image", "text"}
    inputs = modality_inputs(model, torch.Generator().manual_seed(0))
    assert set(inputs) == {"input_ids", "attention_mask", "pixel_values"}
    rec = check(by_type("altclip"))
    assert (rec["forward"], rec["backward"]) == (PASS, PASS), rec["cause"]


def test_forward_first_parameter_stands_in_for_an_unused_main_input_name():
    class Tower(torch.nn.Module):
        main_input_name = "input_ids"  # inherited default, not what forward takes

        def __init__(self):
            super().__init__()
            self.config = type("C", (), {"num_channels": 3, "image_size": 8})()

        def forward(self, pixel_values, output_attentions=None):
            return pixel_values

    inputs = main_input(Tower(), torch.Generator().manual_seed(0))
    assert list(inputs) == ["pixel_values"] and inputs["pixel_values"].shape == (2, 3, 8, 8)


def test_sizes_a_config_class_ties_take_the_value_its_validation_asks_for():
    # XLNet validates d_head == d_model // n_head; the shrink rules shrink d_head and d_model
    # apart, and the class's own message names the size to follow.
    from torchneuron.compat.models.tiny_config import tiny_config

    config = tiny_config("xlnet")
    assert config.d_head == config.d_model // config.n_head == 16


def test_a_tied_size_is_found_through_sub_configs_and_an_unnamed_one_is_not_invented():
    from torchneuron.compat.models.config_repairs import set_tied_size

    d = {"text_config": {"hidden_size": 64}, "speech": {"head_config": {"audio_hidden_size": 512}}}
    assert set_tied_size(d, "head_config.audio_hidden_size", 512, 64)
    assert d["speech"]["head_config"]["audio_hidden_size"] == 64
    assert not set_tied_size(d, "head_config.missing", 512, 64)
    assert not set_tied_size(d, "text_config.hidden_size", 999, 8)  # the stated value differs


def test_a_validation_error_that_names_no_tied_size_still_raises(monkeypatch):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from torchneuron.compat.models import tiny_config

    config_class = CONFIG_MAPPING["bert"]

    def refuse(cls, d, **kwargs):
        raise ValueError("num_layers must be prime")

    monkeypatch.setattr(config_class, "from_dict", classmethod(refuse))
    with pytest.raises(ValueError, match="must be prime"):
        tiny_config.tiny_config("bert")


def test_the_every_width_profile_shrinks_projections_groups_and_compound_scaling():
    d = {"hidden_size": 1024, "out_hidden_size": 4096, "upsample_groups": 512, "num_groups": 32,
         "width_coefficient": 2.0, "rotary_dim": 64, "num_attention_heads": 16}
    assert shrink_dict(d, "every width") == {
        "hidden_size": 64, "out_hidden_size": 64, "upsample_groups": 8, "num_groups": 8,
        "width_coefficient": 1.0, "rotary_dim": 16, "num_attention_heads": 4}
    first = shrink_dict(d)  # the first profile keeps what some models run with as it is
    assert (first["out_hidden_size"], first["upsample_groups"], first["width_coefficient"]) == \
        (4096, 512, 2.0)


def test_video_models_get_clips_with_the_configs_frame_count():
    model, _, _, _, _ = build_tiny(by_type("videomae"))
    clip = main_input(model, torch.Generator().manual_seed(0))["pixel_values"]
    config = model.config
    assert clip.shape == (2, config.num_frames, config.num_channels, config.image_size,
                          config.image_size)


def test_time_series_models_get_past_values_of_the_context_length():
    model, _, _, _, _ = build_tiny(by_type("patchtst"))
    past = main_input(model, torch.Generator().manual_seed(0))["past_values"]
    assert past.shape == (2, model.config.context_length, model.config.num_input_channels)


def test_grid_vision_towers_get_flattened_patches_and_each_images_grid():
    model, _, _, _, _ = build_tiny(by_type("qwen2_5_vl_vision"))
    inputs = main_input(model, torch.Generator().manual_seed(0))
    c = model.config
    merge = c.spatial_merge_size
    assert inputs["grid_thw"].tolist() == [[1, 2 * merge, 2 * merge]] * 2
    assert inputs["hidden_states"].shape == (
        2 * (2 * merge) ** 2, c.in_channels * c.temporal_patch_size * c.patch_size ** 2)


def test_a_grid_tower_naming_its_merge_and_temporal_patch_otherwise_gets_patches_of_that_size():
    # MuseGlimmer's vision config says `merge_size` and `patch_temporal`.
    model, _, _, _, _ = build_tiny(by_type("muse_glimmer_vision"))
    c = model.config
    inputs = main_input(model, torch.Generator().manual_seed(0))
    assert inputs["grid_thw"].tolist() == [[1, 2 * c.merge_size, 2 * c.merge_size]] * 2
    assert inputs["pixel_values"].shape[-1] == 3 * c.patch_temporal * c.patch_size ** 2
    with torch.no_grad():
        assert torch.isfinite(model(**inputs).last_hidden_state).all()


def test_inputs_forward_requires_get_a_recipe_by_their_name():
    class QFormerLike(torch.nn.Module):
        input_modalities = ("image",)
        main_input_name = "pixel_values"

        def __init__(self):
            super().__init__()
            self.config = type("C", (), {"num_channels": 3, "image_size": 8, "vocab_size": 16,
                                         "to_dict": lambda self: {"vocab_size": 16}})()

        def forward(self, pixel_values, qformer_input_ids, attention_mask=None):
            return pixel_values

    inputs = modality_inputs(QFormerLike(), torch.Generator().manual_seed(0))
    assert set(inputs) == {"pixel_values", "qformer_input_ids"}
    assert inputs["qformer_input_ids"].shape == (2, 8) and inputs["qformer_input_ids"].max() < 16


def test_codecs_get_audio_with_the_configs_channel_count():
    class Codec(torch.nn.Module):
        main_input_name = "input_values"

        def __init__(self, config):
            super().__init__()
            self.config = config

        def forward(self, input_values, padding_mask=None):
            return input_values

    stereo = type("C", (), {"audio_channels": 2})()
    plain = type("C", (), {})()
    gen = torch.Generator().manual_seed(0)
    assert main_input(Codec(stereo), gen)["input_values"].shape == (2, 2, 4000)
    assert main_input(Codec(plain), gen)["input_values"].shape == (2, 4000)  # wav2vec2-style


@pytest.mark.slow
def test_the_cpu_probe_leaves_the_model_as_built():
    # Mimi's codebook caches a derived tensor in a plain attribute at its first forward, which
    # .to("neuron") does not move: the probe that picks the recipe runs on a copy, so the model
    # the stages copy to neuron has not run yet, as one loaded from a checkpoint.
    model, _, _, _, _ = build_tiny(by_type("mimi"))
    assert all(m._embed is None for m in model.modules() if hasattr(m, "_embed"))
    rec = check(by_type("mimi"))
    assert (rec["forward"], rec["backward"]) == (PASS, PASS), rec["cause"]


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["videomae", "patchtst", "qwen2_5_vl_vision", "xlnet",
                                        "wavtokenizer"])
def test_types_the_new_recipes_reach_match_the_cpu(model_type):
    # One per recipe: clips, time series, patch grids, a tied size, codec audio channels.
    rec = check(by_type(model_type))
    assert (rec["forward"], rec["backward"]) == (PASS, PASS), rec["cause"]


def test_spectrogram_transformers_get_frames_by_mel_bins():
    class SpectrogramModel(torch.nn.Module):
        main_input_name = "input_values"

        def __init__(self):
            super().__init__()
            self.config = type("C", (), {"num_mel_bins": 128, "max_length": 100})()

        def forward(self, input_values, labels=None):
            return input_values

    gen = torch.Generator().manual_seed(0)
    assert main_input(SpectrogramModel(), gen)["input_values"].shape == (2, 100, 128)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["deepseek_v3", "glm4v_text", "swin", "llama4", "informer",
                                        "omniasr_ctc", "musicgen", "bros"])
def test_types_the_derived_sizes_reach_match_the_cpu(model_type):
    rec = check(by_type(model_type))
    assert (rec["forward"], rec["backward"]) == (PASS, PASS), rec["cause"]


@pytest.mark.slow
def test_a_generator_of_waveforms_is_compared_tensor_by_tensor():
    # VibeVoice's generate() returns a list of waveforms, not token ids.
    rec = check(by_type("vibevoice"))
    assert rec["generate"] == PASS, rec["cause"]
    assert rec["max_abs_error"]["generate"] == 0.0


def test_a_matcher_gets_a_pair_of_images_per_sample():
    from torchneuron.compat.models.main_input import IMAGES_PER_SAMPLE

    model, _, _, every_modality, layout = build_tiny(by_type("lightglue"))
    assert layout == "images per sample"
    x = main_input(model, torch.Generator().manual_seed(0), layout=layout)["pixel_values"]
    assert x.shape[:2] == (2, IMAGES_PER_SAMPLE) and x.dim() == 5
    with torch.no_grad():
        assert torch.isfinite(model(pixel_values=x).matching_scores).all()


def test_a_grid_tower_with_a_convolutional_patch_embedding_gets_each_patch_as_an_image():
    model, _, _, _, layout = build_tiny(by_type("kimi_k25_vision"))
    assert layout == "patches as images"
    inputs = main_input(model, torch.Generator().manual_seed(0), layout=layout)
    p = model.config.patch_size
    assert inputs["pixel_values"].shape[1:] == (3, p, p)
    assert inputs["pixel_values"].shape[0] == int(inputs["grid_thw"].prod(-1).sum())
    with torch.no_grad():
        assert torch.isfinite(model(**inputs).last_hidden_state).all()


def test_sizes_are_read_from_any_sub_config_too():
    from torchneuron.compat.models.input_basics import config_value

    # Nemotron 3.5 Transcribe's audio tower names its mel bins in asr_config only.
    model, _, _, _, _ = build_tiny(by_type("nemotron3_5_transcribe_audio"))
    bins = model.config.asr_config.num_mel_bins
    assert config_value(model.config, "num_mel_bins") == bins
    features = main_input(model, torch.Generator().manual_seed(0))["input_features"]
    assert features.shape[-1] == bins
    with torch.no_grad():
        assert torch.isfinite(model(input_features=features).last_hidden_state).all()
