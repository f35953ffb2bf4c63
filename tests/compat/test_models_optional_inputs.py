"""Models whose optional inputs are not optional in practice get every input forward documents
(the third input set, tried after the main input and every modality), sized from the inputs
already made or from config sizes of the documented names; settings a model reads that its
config class lacks take the value the config tree holds under that name."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import PretrainedConfig  # noqa: E402

from torchneuron.compat.models.catalog import by_type  # noqa: E402
from torchneuron.compat.models.check import build_tiny  # noqa: E402
from torchneuron.compat.models.inputs import EVERY_DOCUMENTED, forward_inputs  # noqa: E402
from torchneuron.compat.models.documented_shapes import documented_input  # noqa: E402
from torchneuron.compat.models.missing_settings import give_missing_setting  # noqa: E402


class _Config(PretrainedConfig):
    model_type = "battery_test"

    def __init__(self, act_dim=3, **kwargs):
        self.act_dim = act_dim
        super().__init__(**kwargs)


class _Trajectories(torch.nn.Module):
    main_input_name = "states"

    def __init__(self):
        super().__init__()
        self.config = _Config()

    def forward(self, states=None, actions=None, timesteps=None, inputs_embeds=None, labels=None,
                output_attentions=None):
        r"""
        states (`torch.Tensor` of shape `(batch_size, episode_length, state_dim)`):
            States.
        actions (`torch.Tensor` of shape `(batch_size, episode_length, act_dim)`):
            Actions.
        timesteps (`torch.LongTensor` of shape `(batch_size, episode_length)`):
            Steps.
        inputs_embeds (`torch.Tensor` of shape `(batch_size, episode_length, hidden_size)`):
            An alternative to the states.
        labels (`torch.LongTensor` of shape `(batch_size,)`):
            Labels.
        """
        return actions.sum() + timesteps.sum()


def test_documented_sizes_come_from_the_config_and_other_lengths_are_the_batterys():
    model = _Trajectories()
    actions = documented_input(model, "actions", {}, torch.Generator().manual_seed(0))
    assert actions.shape == (2, 8, 3) and actions.dtype == torch.float32


def test_the_documented_set_adds_optional_inputs_but_no_alternatives_labels_or_switches():
    model = _Trajectories()
    model.config.state_dim = 5
    gen = torch.Generator().manual_seed(0)
    assert set(forward_inputs(model, "base", gen, every_modality=True)) == {"states"}
    inputs = forward_inputs(model, "base", gen, every_modality=EVERY_DOCUMENTED)
    assert set(inputs) == {"states", "actions", "timesteps"}
    assert inputs["timesteps"].dtype == torch.long and inputs["actions"].shape == (2, 8, 3)


def test_a_decision_transformer_runs_with_every_documented_input():
    model, _, _, every_modality, _ = build_tiny(by_type("decision_transformer"))
    assert every_modality == EVERY_DOCUMENTED
    inputs = forward_inputs(model, "base", torch.Generator().manual_seed(0), every_modality)
    assert inputs["actions"].shape[-1] == model.config.act_dim
    with torch.no_grad():
        assert torch.isfinite(model(**inputs).last_hidden_state).all()


def test_a_setting_a_sub_config_lacks_takes_the_value_the_tree_holds():
    outer = _Config()
    outer.rotary = {"kind": "default", "rotary_base": 500.0}
    outer.inner = PretrainedConfig()
    missing = AttributeError("'PreTrainedConfig' object has no attribute 'rotary_base'")
    assert not hasattr(outer.inner, "rotary_base")
    assert give_missing_setting(outer, missing)
    assert outer.inner.rotary_base == 500.0
    dropout = AttributeError("'PreTrainedConfig' object has no attribute 'attention_dropout_rate'")
    assert give_missing_setting(outer, dropout) and outer.inner.attention_dropout_rate == 0.0
    unknown = AttributeError("'PreTrainedConfig' object has no attribute 'frobnication'")
    assert not give_missing_setting(outer, unknown)
    assert not give_missing_setting(outer, ValueError("'PretrainedConfig' object has no attribute 'x'"))


def test_moonshine_streaming_builds_with_the_key_value_heads_its_encoder_config_holds():
    model, _, _, _, _ = build_tiny(by_type("moonshine_streaming"))
    assert model.config.num_key_value_heads == model.config.encoder_config.num_key_value_heads
    inputs = forward_inputs(model, "seq2seq_lm", torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.isfinite(model(**inputs).logits).all()


class _Anything(torch.nn.Module):
    main_input_name = "inputs"

    def __init__(self):
        super().__init__()
        self.config = _Config()
        self.config.vocab_size = 16

    def forward(self, inputs=None, input_ids=None):
        r"""
        inputs (`torch.Tensor`, *optional*):
            Anything: images, text, audio.
        input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Token ids, an alternative to `inputs`.
        """
        return input_ids


def test_a_main_input_without_a_recipe_is_left_out_where_forward_takes_others():
    from torchneuron.compat.models.input_basics import NoInputRecipe

    model = _Anything()
    gen = torch.Generator().manual_seed(0)
    for every_modality in (False, True):
        with pytest.raises(NoInputRecipe, match="'inputs'"):
            forward_inputs(model, "base", gen, every_modality)
    inputs = forward_inputs(model, "base", gen, EVERY_DOCUMENTED)
    assert set(inputs) == {"input_ids"} and inputs["input_ids"].shape == (2, 8)


def test_a_main_input_documented_with_config_sizes_is_made_from_them():
    model = _Trajectories()
    model.main_input_name = "actions"
    inputs = forward_inputs(model, "base", torch.Generator().manual_seed(0))
    assert inputs["actions"].shape == (2, 8, 3)
