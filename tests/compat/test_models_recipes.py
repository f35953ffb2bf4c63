"""How the model battery grows the set of model types it can try, from configs and the models'
own declarations rather than names: per-layer dicts follow the kept layers, every vocabulary
shrinks, a second shrink profile keeps the full-size head_dim (rotary sections are sized from
it), forward's first parameter stands in for a main_input_name it does not take, and an input per
declared modality (input_modalities) feeds dual encoders."""

import pytest
import torch

pytest.importorskip("transformers")

from torchneuron.compat.models.catalog import by_type  # noqa: E402
from torchneuron.compat.models.check import PASS, build_tiny, check  # noqa: E402
from torchneuron.compat.models.inputs import main_input, modality_inputs  # noqa: E402
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


def test_rotary_sections_sized_from_head_dim_take_the_second_profile():
    # qwen2_vl_text's model code splits the rotary dims in sections of the full-size head_dim:
    # the first profile fails on the CPU, the second runs and passes on neuron.
    model, _, profile, every_modality = build_tiny(by_type("qwen2_vl_text"))
    assert (profile, every_modality) == ("full head_dim", False)
    assert model.config.hidden_size // model.config.num_attention_heads == 128
    rec = check(by_type("qwen2_vl_text"))
    assert (rec["forward"], rec["backward"]) == (PASS, PASS), rec["cause"]


def test_a_dual_encoder_gets_an_input_per_declared_modality():
    model, _, profile, every_modality = build_tiny(by_type("altclip"))
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
