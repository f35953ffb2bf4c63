"""Tiny hybrids keep a layer with attention: a cache of only linear or recurrent layers has no
sequence length to give the attention mask, so the model would fail with its own shrunk
defaults. Checked on the config rules and on the CPU forward of one real model of each rule."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from torchneuron.compat.models.shrink import LAYERS, shrink_dict  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402


def test_a_repeating_pattern_of_layer_kinds_keeps_each_kind():
    out = shrink_dict({"num_hidden_layers": 26, "block_types": ["recurrent", "recurrent", "attention"]})
    assert out["block_types"] == ["recurrent", "attention"]


def test_unset_attention_indices_name_the_last_kept_layer():
    assert shrink_dict({"num_hidden_layers": 32, "attn_layer_indices": None})[
        "attn_layer_indices"] == [LAYERS - 1]


def test_linear_attention_only_ends_in_full_attention_and_hybrids_stay_as_they_are():
    only_linear = shrink_dict({"num_hidden_layers": 32, "layer_types": ["linear_attention"] * 32})
    assert only_linear["layer_types"] == ["linear_attention", "full_attention"]
    hybrid = ["linear_attention"] * 3 + ["full_attention"]
    assert shrink_dict({"num_hidden_layers": 4, "layer_types": hybrid})["layer_types"] == [
        "linear_attention", "full_attention"]
    assert shrink_dict({"num_hidden_layers": 4, "mlp_layer_types": ["dense"] * 4})[
        "mlp_layer_types"] == ["dense", "dense"]


@pytest.mark.parametrize("model_type, class_name", [
    ("bamba", "BambaForCausalLM"), ("recurrent_gemma", "RecurrentGemmaForCausalLM")])
def test_tiny_hybrid_runs_forward_on_the_cpu(model_type, class_name):
    import transformers

    config = tiny_config(model_type)
    torch.manual_seed(0)
    model = getattr(transformers, class_name)(config).eval()
    ids = torch.randint(0, 100, (2, 8))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (2, 8, config.vocab_size) and torch.isfinite(logits).all()
