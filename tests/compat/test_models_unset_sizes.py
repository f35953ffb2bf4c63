"""The last shrink profile gives the sizes a config's defaults leave unset and checkpoints
always set (a mixture of experts' counts and widths, per-kind rotary parameters), and only
there: None stays None in the earlier profiles, where it means "none"."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from torchneuron.compat.models.catalog import by_type  # noqa: E402
from torchneuron.compat.models.check import build_tiny  # noqa: E402
from torchneuron.compat.models.inputs import forward_inputs  # noqa: E402
from torchneuron.compat.models.shrink import PROFILES  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402
from torchneuron.compat.models.unset_sizes import PROFILE, give_unset_sizes  # noqa: E402


def test_unset_expert_sizes_are_given_where_the_config_counts_experts():
    moe = {"num_experts": None, "top_k_experts": None, "moe_intermediate_size": None,
           "n_shared_experts": None, "rope_scaling": None}
    give_unset_sizes(moe)
    assert moe == {"num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32,
                   "n_shared_experts": 1, "rope_scaling": None}
    dense = {"moe_intermediate_size": None}  # no expert count: not a mixture of experts
    give_unset_sizes(dense)
    assert dense == {"moe_intermediate_size": None}


def test_empty_rotary_parameters_get_defaults_for_each_kind_of_layer():
    d = {"text_config": {"rope_parameters": {}, "layer_types": ["full_attention", "sliding_attention",
                                                                  "full_attention"]}}
    give_unset_sizes(d)
    assert set(d["text_config"]["rope_parameters"]) == {"full_attention", "sliding_attention"}


def test_the_profile_comes_after_the_first_ones_and_they_keep_none():
    assert PROFILE in PROFILES
    assert tiny_config("dots1").n_routed_experts is None
    assert tiny_config("dots1", PROFILE).n_routed_experts == 4


def test_diffusion_gemma_builds_and_runs_with_its_experts_given():
    model, _, profile, every_modality, layout = build_tiny(by_type("diffusion_gemma"))
    assert profile == PROFILE
    inputs = forward_inputs(model, "causal_lm", torch.Generator().manual_seed(0), every_modality, layout)
    with torch.no_grad():
        assert torch.isfinite(model(**inputs).logits).all()


def test_an_unset_padding_id_takes_the_highest_id_no_special_token_has():
    d = {"vocab_size": 8, "pad_token_id": None, "eos_token_id": 7, "bos_token_id": 6}
    give_unset_sizes(d)
    assert d["pad_token_id"] == 5
    assert tiny_config("esm").pad_token_id is None  # the earlier profiles keep it unset


def test_an_unset_clipping_bound_is_given_in_the_last_profile():
    d = {"attn_config": {"clip_qkv": None, "kv_n_heads": 1}, "clip_sample": True}
    give_unset_sizes(d)
    assert d == {"attn_config": {"clip_qkv": 8.0, "kv_n_heads": 1}, "clip_sample": True}


def test_unset_layer_kinds_get_the_documented_kinds_else_full_attention():
    d = {"num_hidden_layers": 3, "model_type": "deepseek_ocr2_text", "mlp_layer_types": None}
    give_unset_sizes(d)  # documented: `["dense", "sparse", "sparse", ...]`
    assert d["mlp_layer_types"] == ["dense", "sparse", "sparse"]
    d = {"num_hidden_layers": 2, "model_type": "lfm2_moe", "layer_types": None}
    give_unset_sizes(d)  # not documented: the kind every model with layer kinds knows
    assert d["layer_types"] == ["full_attention", "full_attention"]
    no_count = {"layer_types": None}
    give_unset_sizes(no_count)
    assert no_count == {"layer_types": None}


def test_dbrx_runs_with_the_clipping_bound_its_checkpoints_set():
    model, _, profile, every_modality, layout = build_tiny(by_type("dbrx"))
    assert profile == PROFILE and model.config.attn_config.clip_qkv == 8.0
    inputs = forward_inputs(model, "causal_lm", torch.Generator().manual_seed(0), every_modality, layout)
    with torch.no_grad():
        assert torch.isfinite(model(**inputs).logits).all()


def test_an_unset_sliding_window_gets_one_in_the_last_profile_only():
    from torchneuron.compat.models.unset_sizes import SLIDING_WINDOW

    d = {"num_hidden_layers": 2, "layer_types": ["full_attention"] * 2, "sliding_window": None}
    give_unset_sizes(d)  # Step3p7 makes a sliding mask whatever its layer kinds
    assert d["sliding_window"] == SLIDING_WINDOW
    from torchneuron.compat.models.shrink import shrink_dict

    assert shrink_dict({"sliding_window": None}, PROFILES[0]) == {"sliding_window": None}


def test_a_kept_layer_kinds_own_unset_settings_get_tiny_values():
    d = {"layer_types": ["linear_attention", "indexed_attention"], "indexer_n_heads": None,
         "indexer_kv_heads": None, "indexer_head_dim": None, "indexer_budget": None,
         "indexer_compress_ratio": None}
    give_unset_sizes(d)
    assert d == {"layer_types": ["linear_attention", "indexed_attention"], "indexer_n_heads": 4,
                 "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 4,
                 "indexer_compress_ratio": 2}
    partly = {"layer_types": ["indexed_attention"], "indexer_n_heads": 8, "indexer_budget": None}
    give_unset_sizes(partly)  # the defaults set some: not left unset as a group
    assert partly["indexer_budget"] is None
    ordinary = {"layer_types": ["full_attention"], "full_window": None}
    give_unset_sizes(ordinary)
    assert ordinary["full_window"] is None
