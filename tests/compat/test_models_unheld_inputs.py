"""Inputs and settings the battery makes where neither the config nor forward's documentation
holds them outright: a special token id no config of the tree holds gets an unused id, a
vector the config bounds as `max_<name>_dim` is one per sample, forward's `hidden_states`
standing in for a codec's audio are latents in the model's width (also width-first), and
several images per sample come with a mask saying every image is real."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import PretrainedConfig  # noqa: E402

from torchneuron.compat.models.catalog import by_type  # noqa: E402
from torchneuron.compat.models.check import build_tiny  # noqa: E402
from torchneuron.compat.models.main_input import IMAGES_PER_SAMPLE, main_input  # noqa: E402
from torchneuron.compat.models.missing_settings import give_missing_setting  # noqa: E402


class _Config(PretrainedConfig):
    model_type = "battery_unheld_test"

    def __init__(self, **kwargs):
        self.vocab_size = 16
        self.image_token_id = 15
        self.hidden_size = 12
        self.max_state_dim = 6
        super().__init__(**kwargs)


def test_a_token_id_nobody_holds_gets_the_highest_unused_id():
    config = _Config(pad_token_id=14)
    missing = AttributeError("'_Config' object has no attribute 'vision_start_token_id'")
    assert give_missing_setting(config, missing)
    assert config.vision_start_token_id == 13  # 15 and 14 are the image and padding tokens
    again = AttributeError("'_Config' object has no attribute 'vision_end_token_id'")
    assert give_missing_setting(config, again) and config.vision_end_token_id == 12


class _Policy(torch.nn.Module):
    main_input_name = "state"

    def __init__(self):
        super().__init__()
        self.config = _Config()

    def forward(self, state, pixel_values=None, pixel_attention_mask=None):
        r"""
        state (`torch.Tensor`, *optional*):
            Current robot state.
        pixel_values (`torch.Tensor` of shape `(batch_size, num_channels, image_size, image_size)`):
            Camera images.
        pixel_attention_mask (`torch.Tensor`, *optional*):
            Which cameras are real.
        """
        return state


def test_a_vector_bounded_by_max_name_dim_is_one_per_sample():
    inputs = main_input(_Policy(), torch.Generator().manual_seed(0))
    assert set(inputs) == {"state"} and inputs["state"].shape == (2, 6)


def test_several_images_per_sample_come_with_a_mask_of_real_images():
    model = _Policy()
    inputs = main_input(model, torch.Generator().manual_seed(0), "pixel_values", "images per sample")
    assert inputs["pixel_values"].shape[:2] == (2, IMAGES_PER_SAMPLE)
    assert inputs["pixel_attention_mask"].dtype == torch.bool
    assert inputs["pixel_attention_mask"].shape == (2, IMAGES_PER_SAMPLE)
    assert inputs["pixel_attention_mask"].all()


class _Decoder(torch.nn.Module):
    main_input_name = "input_values"  # inherited; forward takes latents by another name

    def __init__(self):
        super().__init__()
        self.config = _Config()

    def forward(self, hidden_states, padding_cache=None):
        return hidden_states


def test_hidden_states_standing_in_for_audio_are_latents_in_the_models_width():
    gen = torch.Generator().manual_seed(0)
    assert main_input(_Decoder(), gen)["hidden_states"].shape == (2, 8, 12)
    transposed = main_input(_Decoder(), gen, layout="audio transposed")["hidden_states"]
    assert transposed.shape == (2, 12, 8)


def test_vibevoices_acoustic_decoder_runs_on_width_first_latents():
    model, _, _, _, layout = build_tiny(by_type("vibevoice_acoustic_tokenizer_decoder"))
    assert layout == "audio transposed"
    latents = main_input(model, torch.Generator().manual_seed(0), layout=layout)["hidden_states"]
    assert latents.shape[1] == model.config.hidden_size
    with torch.no_grad():
        assert torch.isfinite(model(hidden_states=latents).audio).all()


class _Series(torch.nn.Module):
    main_input_name = "past_values"

    def __init__(self):
        super().__init__()
        self.config = _Config()
        self.config.merge_size = 2

    def forward(self, past_values, past_values_padding, grid_thw=None, merge_sizes=None, scale_sizes=None):
        r"""
        past_values (`torch.Tensor` of shape `(batch_size, sequence_length)`):
            Past values of the series.
        past_values_padding (`torch.LongTensor` of shape `(batch_size, sequence_length)`):
            The padding indicator of the time series.
        merge_sizes (`torch.Tensor` of shape `(num_images_or_videos,)`):
            The spatial downsampling ratio of each image.
        scale_sizes (`torch.Tensor` of shape `(num_images_or_videos,)`):
            A size the config does not name.
        """
        return past_values


def test_a_documented_input_reads_its_sizes_off_the_inputs_made_before_it():
    from torchneuron.compat.models.inputs import EVERY_DOCUMENTED, forward_inputs

    inputs = forward_inputs(_Series(), "base", torch.Generator().manual_seed(0), True)
    assert inputs["past_values_padding"].shape == inputs["past_values"].shape  # not the battery's 8
    assert not inputs["past_values_padding"].any()  # nothing padded
    inputs = forward_inputs(_Series(), "base", torch.Generator().manual_seed(0), EVERY_DOCUMENTED)
    assert inputs["merge_sizes"].dtype == torch.long and inputs["merge_sizes"].tolist() == [2, 2]
    assert inputs["scale_sizes"].tolist() == [1, 1]  # no config size: the one that changes nothing


class _Grounded(torch.nn.Module):
    main_input_name = "pixel_values"
    input_modalities = ("image", "text")

    def __init__(self):
        super().__init__()
        self.config = _Config()
        del self.config.image_token_id  # places are marked by a mask, not by a token

    def get_image_features(self, pixel_values):
        return torch.zeros(pixel_values.shape[0], 3, 12)  # three latent queries per image

    def forward(self, pixel_values=None, input_ids=None, attention_mask=None,
                image_embeds_position_mask=None):
        return input_ids


def test_a_position_mask_marks_one_place_per_image_feature_ahead_of_the_text():
    from torchneuron.compat.models.inputs import forward_inputs

    inputs = forward_inputs(_Grounded(), "base", torch.Generator().manual_seed(0), True)
    ids, mask = inputs["input_ids"], inputs["image_embeds_position_mask"]
    assert ids.shape == (2, 3 + 8) and mask.shape == ids.shape
    assert mask[:, :3].all() and not mask[:, 3:].any()
    assert (ids[:, :3] == ids[:, 3:4]).all()  # ordinary tokens there: the text's first
    assert inputs["attention_mask"].shape == ids.shape


class _Speech(torch.nn.Module):
    main_input_name = "inputs"
    input_modalities = "audio"

    def __init__(self):
        super().__init__()
        self.config = _Config()

    def forward(self, inputs=None, lengths=None):
        r"""
        inputs (`torch.Tensor` of shape `(batch_size, sequence_length)`, *optional*):
            Float values of the raw speech waveform.
        lengths (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Not a waveform: integers.
        """
        return inputs


def test_a_float_sequence_of_an_audio_only_model_is_a_waveform():
    from torchneuron.compat.models.input_basics import AUDIO_SAMPLES
    from torchneuron.compat.models.documented_shapes import documented_input

    gen = torch.Generator().manual_seed(0)
    assert main_input(_Speech(), gen)["inputs"].shape == (2, AUDIO_SAMPLES)
    assert documented_input(_Speech(), "lengths", {}, gen).shape == (2, 8)
    both = _Speech()
    both.input_modalities = ("audio", "text")  # not audio alone: the battery's length
    assert documented_input(both, "inputs", {}, gen).shape == (2, 8)


class _CrossAttending(torch.nn.Module):
    main_input_name = "input_ids"
    input_modalities = ("image", "text")

    def __init__(self):
        super().__init__()
        self.config = _Config()
        del self.config.image_token_id

    def forward(self, input_ids=None, pixel_values=None, image_attention_mask=None):
        r"""
        pixel_values (`torch.Tensor` of shape `(batch_size, num_images, num_channels, height, width)`):
            Images.
        image_attention_mask (`torch.LongTensor`, *optional*):
            Which images each token sees.
        """
        return input_ids


def test_with_several_images_per_sample_every_token_sees_every_image():
    from torchneuron.compat.models.inputs import forward_inputs

    gen = torch.Generator().manual_seed(0)
    inputs = forward_inputs(_CrossAttending(), "base", gen, True, "images per sample")
    mask = inputs["image_attention_mask"]
    assert mask.shape == (2, 8, IMAGES_PER_SAMPLE) and mask.dtype == torch.long and mask.all()
    one_image = forward_inputs(_CrossAttending(), "base", gen, True)
    assert "image_attention_mask" not in one_image  # one image per sample: nothing to choose


@pytest.mark.slow
@pytest.mark.parametrize("model_type", [
    "qwen2_5_omni_thinker", "pi0", "vibevoice_acoustic_tokenizer_decoder", "granite_speech5_ctc",
    "muse_glimmer_assistant", "qwen3_asr_encoder", "kosmos-2", "speech-encoder-decoder",
    "step3p7", "qwen4_exp_text", "idefics", "video_llama_3_vision"])
def test_types_the_unheld_inputs_reach_match_the_cpu(model_type):
    from torchneuron.compat.models.check import PASS, check

    rec = check(by_type(model_type))  # neuron against the CPU, forward and every gradient
    assert (rec["forward"], rec["backward"]) == (PASS, PASS), rec["cause"]
    assert rec["generate"] in (PASS, "n/a"), rec["cause"]
