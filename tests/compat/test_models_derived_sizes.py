"""Sizes a config derives from others are derived again after shrinking: multi-head latent
attention's qk_head_dim is the sum of its parts and head_dim the part it equals, key/value
heads equal to the query heads stay equal (None means equal), an unset top-k gets a value where
experts exist, expert groups fit the shrunk expert count, validation rules that name two sizes
without values, ask for a value first or name a list's last value are followed, layer indices
into a shrunk tower are mapped into it, a prior probability is kept, and multimodal rotary sections that the defaults leave out are sized
for the shrunk head."""

import pytest

pytest.importorskip("transformers")

from torchneuron.compat.models.shrink import HEADS, shrink_dict  # noqa: E402
from torchneuron.compat.models.follow_widths import add_rotary_sections  # noqa: E402
from torchneuron.compat.models.config_repairs import repair_tied_size  # noqa: E402


def test_latent_attention_head_parts_stay_consistent():
    d = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 32,
         "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_head_dim": 192,
         "head_dim": 64}
    out = shrink_dict(d)
    assert out["qk_head_dim"] == out["qk_nope_head_dim"] + out["qk_rope_head_dim"]
    assert out["head_dim"] == out["qk_rope_head_dim"]  # the part head_dim equals by default
    assert out["num_key_value_heads"] == out["num_attention_heads"] == HEADS


def test_head_dim_left_none_is_the_quotient_and_grouped_kv_heads_stay_grouped():
    out = shrink_dict({"hidden_size": 4096, "num_attention_heads": 32, "head_dim": None,
                       "num_key_value_heads": None})
    assert out["head_dim"] == 64 // HEADS and out["num_key_value_heads"] == HEADS
    gqa = shrink_dict({"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8})
    assert gqa["num_key_value_heads"] < gqa["num_attention_heads"]


def test_unset_top_k_gets_a_value_only_where_experts_exist():
    assert shrink_dict({"n_routed_experts": 64, "num_experts_per_tok": None})[
        "num_experts_per_tok"] == 2
    assert shrink_dict({"num_experts_per_tok": None})["num_experts_per_tok"] is None
    assert shrink_dict({"num_experts": 256, "num_group": 8})["num_group"] == 1


def test_a_rule_that_names_two_sizes_is_followed_and_an_unknown_one_is_not():
    small = {"hidden_size": 64, "adapter": {"adapter_in_dim": 1024, "hidden_size": 64}}
    assert repair_tied_size(small, "adapter_in_dim must match hidden_size")
    assert small["adapter"]["adapter_in_dim"] == 64
    assert not repair_tied_size(small, "vision width must match the text hidden size")
    assert not repair_tied_size(small, "adapter_in_dim must match hidden_size")  # already equal


def test_rules_that_ask_for_a_value_first_or_the_last_of_a_list_are_followed():
    small = {"text": {"hidden_size_per_layer_input": 256}}
    assert repair_tied_size(small, "hidden_size_per_layer_input must be 0, got 256")
    assert small["text"]["hidden_size_per_layer_input"] == 0
    small = {"hidden_size": 64, "out_features": [64, 128, 256]}
    assert repair_tied_size(small, "hidden_size should be equal to the last value in out_features. "
                                   "hidden_size = 64, out_features = 256")
    assert small["hidden_size"] == 256
    assert not repair_tied_size(small, "hidden_size must be 0, got 64")  # not what it holds


def test_layer_indices_into_a_shrunk_tower_keep_their_order_from_the_deepest():
    small = {"adapter_config": {"vision_feature_layer": [24, 18]}, "vision_config": {}}
    message = "`adapter_config.vision_feature_layer` [24, 18] must index the 2 layers of `vision_config`."
    assert repair_tied_size(small, message)
    assert small["adapter_config"]["vision_feature_layer"] == [1, 0]
    small = {"feature_layers": [3, 7, 11]}
    assert repair_tied_size(small, "`feature_layers` [3, 7, 11] must index the 2 layers of `x`")
    assert small["feature_layers"] == [0, 0, 1]  # past the first layer: the first


def test_a_prior_probability_is_no_rate_of_randomness():
    out = shrink_dict({"initializer_bias_prior_prob": 0.01, "hidden_dropout_prob": 0.1,
                       "mask_time_prob": 0.05})
    assert out == {"initializer_bias_prior_prob": 0.01, "hidden_dropout_prob": 0.0,
                   "mask_time_prob": 0.0}


def test_declared_rotary_sections_are_added_for_the_shrunk_head():
    class TextConfig:
        ignore_keys_at_rope_validation = {"mrope_section"}

    class Config:
        sub_configs = {"text_config": TextConfig}

    d = {"text_config": {"hidden_size": 64, "num_attention_heads": 4,
                         "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}},
         "rope_parameters": {"rope_type": "default"}}
    add_rotary_sections(Config, d)
    assert sum(d["text_config"]["rope_parameters"]["mrope_section"]) == 16 * 0.5 // 2
    assert "mrope_section" not in d["rope_parameters"]  # Config itself does not declare it
    given = {"hidden_size": 64, "num_attention_heads": 4,
             "rope_parameters": {"rope_type": "default", "mrope_section": [1, 1, 2]}}
    add_rotary_sections(TextConfig, given)
    assert given["rope_parameters"]["mrope_section"] == [1, 1, 2]  # a given section stays


def test_per_layer_head_counts_shrink_with_the_heads():
    d = {"num_hidden_layers": 4, "num_attention_heads": 16,
         "num_key_value_heads_per_layer": [16, 16, 8, 8]}
    out = shrink_dict(d)
    assert out["num_key_value_heads_per_layer"] == [2, 2]  # layers 0 and 2, kv heads shrunk


def test_the_full_image_profile_keeps_image_patch_and_window_and_shrinks_widths():
    d = {"image_size": 224, "patch_size": 4, "window_size": 7, "embed_dim": 96,
         "depths": [2, 2, 6, 2], "num_groups": 32}
    out = shrink_dict(d, "every width, full image")
    assert (out["image_size"], out["patch_size"], out["window_size"]) == (224, 4, 7)
    assert out["embed_dim"] == 64 and out["depths"] == [1, 1, 1, 1] and out["num_groups"] == 8
    assert shrink_dict(d)["image_size"] == 32  # the first profile shrinks the image


def test_a_vocabulary_left_unset_gets_the_tiny_one():
    assert shrink_dict({"vocab_size": None})["vocab_size"] == 256


def test_a_text_head_of_a_composite_type_gets_the_sub_config_of_its_class():
    from transformers import Llama4Config, Llama4ForCausalLM, Llama4TextConfig

    from torchneuron.compat.models.check import _config_for

    config = Llama4Config()
    assert isinstance(_config_for(Llama4ForCausalLM, config), Llama4TextConfig)
    text = Llama4TextConfig()
    assert _config_for(Llama4ForCausalLM, text) is text


def test_a_width_that_equals_hidden_size_in_the_defaults_follows_it():
    out = shrink_dict({"hidden_size": 128, "codebook_dim": 128, "codebook_size": 1024,
                       "upsampling_ratios": [8, 5]})
    assert out["codebook_dim"] == 64 and out["codebook_size"] == 1024


def test_audio_inputs_have_a_second_layout_with_channels_or_features_first():
    import torch

    from torchneuron.compat.models.main_input import _audio_transposed

    inputs = {"input_values": torch.zeros(2, 4000), "input_features": torch.zeros(2, 64, 80),
              "input_ids": torch.zeros(2, 8, dtype=torch.long)}
    out = _audio_transposed(inputs)
    assert out["input_values"].shape == (2, 1, 4000)
    assert out["input_features"].shape == (2, 80, 64)
    assert out["input_ids"] is inputs["input_ids"]
    codec = _audio_transposed({"input_values": torch.zeros(2, 2, 4000)})
    assert codec["input_values"].shape == (2, 2, 4000)  # already has its channels


def test_a_convolutional_audio_encoder_runs_in_the_second_layout():
    from torchneuron.compat.models.catalog import by_type
    from torchneuron.compat.models.check import build_tiny

    *_, every_modality, layout = build_tiny(by_type("omniasr_ctc"))
    assert layout == "audio transposed"
    assert build_tiny(by_type("wav2vec2"))[-1] == "as documented"  # the first layout still first


def test_a_layer_period_shrinks_and_its_offset_stays_inside_it():
    out = shrink_dict({"num_hidden_layers": 32, "attn_layer_period": 8, "attn_layer_offset": 4,
                       "expert_layer_period": 2, "expert_layer_offset": 1})
    assert (out["attn_layer_period"], out["attn_layer_offset"]) == (2, 0)
    assert (out["expert_layer_period"], out["expert_layer_offset"]) == (2, 1)


def test_kept_layers_cover_the_attention_kinds_before_the_mlp_kinds():
    n = 8
    d = {"num_hidden_layers": n, "mlp_layer_types": ["dense"] + ["sparse"] * (n - 1),
         "layer_types": ["linear_attention"] * 4 + ["full_attention"] + ["linear_attention"] * 3}
    out = shrink_dict(d)
    assert out["layer_types"] == ["linear_attention", "full_attention"]  # layers 0 and 4
    assert out["mlp_layer_types"] == ["dense", "sparse"]


def test_a_mamba2_mixer_keeps_heads_times_width_equal_to_expand_times_hidden():
    out = shrink_dict({"hidden_size": 4096, "num_heads": 128, "head_dim": 64, "expand": 2,
                       "n_groups": 8})
    assert out["num_heads"] * out["head_dim"] == out["expand"] * out["hidden_size"]
    assert out["num_heads"] % out["n_groups"] == 0
    other = shrink_dict({"hidden_size": 4096, "num_heads": 32, "head_dim": 64})
    assert other["head_dim"] == 16  # no expand: not a Mamba-2 mixer, the ordinary rule


def test_a_layer_count_that_counts_stages_follows_the_stage_lists():
    out = shrink_dict({"num_hidden_layers": 4, "depths": [2, 2, 2, 2],
                       "hidden_sizes": [256, 512, 1024, 2048]})
    assert out["num_hidden_layers"] == len(out["depths"]) == 4
    deep = shrink_dict({"num_hidden_layers": 24, "depths": [2, 2, 18, 2]})
    assert deep["num_hidden_layers"] == 2  # counts layers, not stages: shrinks as usual


def test_codebook_decoders_get_one_row_of_ids_per_codebook():
    import torch

    from torchneuron.compat.models.catalog import by_type
    from torchneuron.compat.models.check import build_tiny
    from torchneuron.compat.models.input_basics import BATCH
    from torchneuron.compat.models.main_input import main_input

    model, *_, layout = build_tiny(by_type("musicgen"))
    assert layout == "ids per codebook"
    ids = main_input(model, torch.Generator().manual_seed(0), layout=layout)["input_ids"]
    assert ids.shape[0] == BATCH * model.config.num_codebooks


def test_embeddings_and_latents_are_vectors_in_the_models_width():
    import torch

    from torchneuron.compat.models.input_basics import BATCH, SEQ, NoInputRecipe
    from torchneuron.compat.models.main_input import main_input

    class Model:
        class config:  # noqa: N801 - stands for a config instance
            hidden_size = 64

        def forward(self, inputs_embeds, latents=None, context_hidden_states=None):
            pass

    gen = torch.Generator().manual_seed(0)
    for name in ("inputs_embeds", "latents", "context_hidden_states", "noise_embeds"):
        assert main_input(Model(), gen, name)[name].shape == (BATCH, SEQ, 64)
    assert main_input(Model(), gen, "latents", "audio transposed")["latents"].shape == (BATCH, 64, SEQ)
    Model.config.hidden_size = None
    with pytest.raises(NoInputRecipe, match="no width"):
        main_input(Model(), gen, "inputs_embeds")


def test_lists_that_split_the_width_are_split_alike_and_object_queries_shrink():
    out = shrink_dict({"hidden_size": 256, "axial_pos_embds_dim": [64, 192], "num_queries": 300})
    assert out["axial_pos_embds_dim"] == [16, 48] and sum(out["axial_pos_embds_dim"]) == 64
    assert out["num_queries"] == 16


def test_a_layers_own_head_parts_keep_their_sum_as_its_head_dim():
    # dots3_note_text: sliding layers override qk_nope_head_dim (192 + 64 = head_dim 256).
    d = {"hidden_size": 4096, "num_attention_heads": 64, "num_hidden_layers": 4,
         "head_dim": 256, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
         "layer_types": ["indexed", "indexed", "sliding", "sliding"],
         "per_layer_config": {"02": {"qk_nope_head_dim": 192}, "03": {"qk_nope_head_dim": 192}}}
    out = shrink_dict(d)
    layer = out["per_layer_config"]["1"]  # layer 2 is kept as layer 1
    assert layer["head_dim"] == layer["qk_nope_head_dim"] + out["qk_rope_head_dim"]
    assert out["head_dim"] == out["hidden_size"] // out["num_attention_heads"]


def test_the_report_names_the_command_line_after_the_subcommand(monkeypatch):
    import sys

    from torchneuron.compat.models.command import _arguments_after

    monkeypatch.setattr(sys, "argv", ["python -m torchneuron.compat", "models", "--out", "r"])
    assert _arguments_after("models") == ["--out", "r"]
    monkeypatch.setattr(sys, "argv", ["torchneuron", "compat", "models", "--jobs", "2"])
    assert _arguments_after("models") == ["--jobs", "2"]


def test_the_every_width_profile_shrinks_the_base_width_of_convolutional_towers():
    d = {"base_channels": 128, "num_filters": 32, "channel_multiplier": [1, 2, 4]}
    out = shrink_dict(d, "every width")
    assert (out["base_channels"], out["num_filters"]) == (32, 8)
    assert shrink_dict(d)["base_channels"] == 128  # the first profile leaves it


def test_layout_boxes_are_ordered_corners_inside_the_page():
    import torch

    from torchneuron.compat.models.inputs import boxes

    class Config:
        max_2d_position_embeddings = 512

    b = boxes(Config(), (2, 8), torch.Generator().manual_seed(0))
    assert b.shape == (2, 8, 4) and b.dtype == torch.long
    assert (b[..., 0] <= b[..., 2]).all() and (b[..., 1] <= b[..., 3]).all()
    assert b.min() >= 0 and b.max() <= 511


def test_a_forecasters_required_lengths_and_past_inputs_come_from_its_config():
    import torch

    from torchneuron.compat.models.catalog import by_type
    from torchneuron.compat.models.check import build_tiny
    from torchneuron.compat.models.input_basics import BATCH
    from torchneuron.compat.models.inputs import modality_inputs
    from torchneuron.compat.models.config_repairs import REQUIRED_LENGTH

    model, *_ = build_tiny(by_type("informer"))
    config = model.config
    assert config.prediction_length == config.context_length == REQUIRED_LENGTH
    inputs = modality_inputs(model, torch.Generator().manual_seed(0))
    past = config.context_length + max(config.lags_sequence)  # documented past length
    assert inputs["past_values"].shape == (BATCH, past)
    assert inputs["past_observed_mask"].shape == (BATCH, past)
    assert inputs["past_time_features"].shape[:2] == (BATCH, past)


def test_a_required_length_is_given_only_where_the_model_asks_and_the_config_leaves_it_unset():
    from transformers import InformerConfig

    from torchneuron.compat.models.config_repairs import give_required_length

    config = InformerConfig()
    asked = ValueError("The `prediction_length` config needs to be specified.")
    assert give_required_length(config, asked) and config.prediction_length == 8
    assert not give_required_length(config, asked)  # now set: the error is the model's own
    assert not give_required_length(InformerConfig(), ValueError("something else"))


def test_native_resolution_towers_get_padded_patches_a_mask_and_each_images_shape():
    import torch

    from torchneuron.compat.models.catalog import by_type
    from torchneuron.compat.models.check import build_tiny
    from torchneuron.compat.models.input_basics import BATCH
    from torchneuron.compat.models.main_input import NATIVE_SIDE, main_input

    model, *_ = build_tiny(by_type("siglip2_vision_model"))
    inputs = main_input(model, torch.Generator().manual_seed(0))
    patch, channels = model.config.patch_size, model.config.num_channels
    assert inputs["pixel_values"].shape == (BATCH, NATIVE_SIDE ** 2, channels * patch * patch)
    assert inputs["pixel_attention_mask"].shape == (BATCH, NATIVE_SIDE ** 2)
    assert inputs["spatial_shapes"].tolist() == [[NATIVE_SIDE, NATIVE_SIDE]] * BATCH


def test_an_input_features_mask_marks_every_frame_valid_on_the_frame_axis():
    import torch

    from torchneuron.compat.models.inputs import _all_frames_valid

    class Config:
        num_mel_bins = 128

    mel_first = _all_frames_valid(Config(), torch.zeros(2, 128, 300))
    frames_first = _all_frames_valid(Config(), torch.zeros(2, 64, 128))
    assert mel_first.shape == (2, 300) and frames_first.shape == (2, 64)
    assert mel_first.dtype == torch.long and bool(mel_first.all())


def test_inputs_the_config_sizes_by_name_and_language_ids_come_with_the_modalities():
    import torch

    from torchneuron.compat.models.catalog import by_type
    from torchneuron.compat.models.check import build_tiny
    from torchneuron.compat.models.input_basics import BATCH, SEQ
    from torchneuron.compat.models.inputs import modality_inputs

    model, *_ = build_tiny(by_type("lxmert"))
    inputs = modality_inputs(model, torch.Generator().manual_seed(0))
    assert inputs["visual_feats"].shape == (BATCH, SEQ, model.config.visual_feat_dim)
    assert inputs["visual_pos"].shape == (BATCH, SEQ, model.config.visual_pos_dim)
    model, *_ = build_tiny(by_type("xmod"))
    assert modality_inputs(model, torch.Generator().manual_seed(0))["lang_ids"].tolist() == [0, 0]


def test_stage_channel_lists_shrink_alike_so_stages_still_chain():
    d = {"hidden_sizes": [256, 512, 1024, 2048], "stage_in_channels": [48, 128, 512, 1024],
         "stage_out_channels": [128, 512, 1024, 2048]}
    out = shrink_dict(d, "every width")
    assert out["stage_in_channels"][1:] == out["stage_out_channels"][:-1]
    assert out["stage_out_channels"][-1] == out["hidden_sizes"][-1]
    assert shrink_dict(d)["stage_out_channels"] == d["stage_out_channels"]  # first profile keeps them


def test_tiny_hgnet_v2_classifies_on_the_cpu():
    import torch
    from transformers import HGNetV2ForImageClassification

    from torchneuron.compat.models.tiny_config import tiny_config

    model = HGNetV2ForImageClassification(tiny_config("hgnet_v2", "every width")).eval()
    with torch.no_grad():
        logits = model(pixel_values=torch.randn(2, 3, 32, 32)).logits
    assert logits.shape == (2, model.config.num_labels)
