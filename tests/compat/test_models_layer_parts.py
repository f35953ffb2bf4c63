"""Shrinking keeps counts a config derives from others consistent: layer counts split into
parts keep their sum (with per-layer lists as long), heads per stage divide the shrunk widths,
and the input layouts are chosen from every input the battery may give."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from torchneuron.compat.models.catalog import by_type  # noqa: E402
from torchneuron.compat.models.check import _build, _layouts, build_tiny  # noqa: E402
from torchneuron.compat.models.shrink import HIDDEN, shrink_dict  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402


def test_layer_counts_split_into_parts_keep_their_sum_and_per_layer_lists_follow():
    kinds = ["sliding", "mlp"] * 36
    out = shrink_dict({"num_hidden_layers": 72, "n_input_layers": 16, "n_recurrent_layers": 40,
                       "n_output_layers": 16, "layer_types": kinds})
    assert out["num_hidden_layers"] == out["n_input_layers"] + out["n_recurrent_layers"] \
        + out["n_output_layers"] == 6
    assert out["layer_types"] == kinds[:6]
    # parts that do not add up to the total are not parts of it
    other = shrink_dict({"num_hidden_layers": 12, "num_decoder_layers": 6, "num_encoder_layers": 4})
    assert other["num_hidden_layers"] == 2


def test_dory_builds_with_its_layer_parts_summing_to_its_layers():
    config = tiny_config("dory")
    assert config.num_hidden_layers == len(config.layer_types) == \
        config.n_input_layers + config.n_recurrent_layers + config.n_output_layers


def test_heads_per_stage_are_powers_of_two_that_divide_every_shrunk_width():
    out = shrink_dict({"embed_dim": 180, "num_heads": [6, 6, 6, 6, 6, 6]})
    assert out["num_heads"] == [1, 2, 4, 4, 4, 4]
    assert all(out["embed_dim"] % h == 0 for h in out["num_heads"]) and out["embed_dim"] == HIDDEN
    assert shrink_dict({"num_attention_heads": [1, 2, 5, 8]})["num_attention_heads"] == [1, 2, 4, 8]


def test_a_documented_audio_input_gets_the_audio_layouts_too():
    # CLVP's forward takes input_features only as a documented optional input.
    model, _ = _build(by_type("clvp"), "small heads")
    assert "audio transposed" in _layouts(model, by_type("clvp"))
    model, *_, layout = build_tiny(by_type("clvp"))
    assert layout == "audio transposed"


def test_key_value_heads_of_each_side_stay_equal_to_that_sides_query_heads():
    out = shrink_dict({"encoder_num_attention_heads": 8, "encoder_num_key_value_heads": 8,
                       "decoder_num_attention_heads": 8, "decoder_num_key_value_heads": None})
    assert out["encoder_num_key_value_heads"] == out["encoder_num_attention_heads"] == 4
    assert out["decoder_num_key_value_heads"] == out["decoder_num_attention_heads"] == 4
    grouped = shrink_dict({"encoder_num_attention_heads": 8, "encoder_num_key_value_heads": 2})
    assert grouped["encoder_num_key_value_heads"] == 2  # grouped-query attention stays grouped
