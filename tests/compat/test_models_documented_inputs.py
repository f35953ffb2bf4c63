"""A required input with no recipe is built from forward's documented type and shape, sizes
read off the inputs already made (or the config's own length for that input); audio models
get an all-valid frame mask where forward reads one; a staged backbone keeps the outputs its
config names (every level a pixel decoder reads)."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from torchneuron.compat.models.documented_shapes import documented_input  # noqa: E402
from torchneuron.compat.models.inputs import forward_inputs  # noqa: E402
from torchneuron.compat.models.shrink import shrink_dict  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402


class _Documented(torch.nn.Module):
    def forward(self, past_values, past_values_padding, freq, mask, unknown):
        r"""
        past_values (`torch.Tensor` of shape `(batch_size, sequence_length)`):
            Past values.
        past_values_padding (`torch.LongTensor` of shape `(batch_size, sequence_length)`):
            1 where padded.
        freq (`torch.LongTensor` of shape `(batch_size,)`):
            Frequency index.
        mask (`torch.BoolTensor` of shape `(batch_size, sequence_length)`):
            True where valid.
        unknown (`torch.Tensor` of shape `(batch_size, some_width)`):
            No size for some_width anywhere.
        """


def test_required_inputs_follow_their_documented_shape_and_kind():
    model = _Documented()
    model.config = None
    made = {"past_values": torch.zeros(2, 12)}
    gen = torch.Generator().manual_seed(0)
    padding = documented_input(model, "past_values_padding", made, gen)
    assert padding.shape == (2, 12) and padding.dtype == torch.long and not padding.any()
    assert documented_input(model, "freq", made, gen).tolist() == [0, 0]
    assert documented_input(model, "mask", made, gen).all()
    assert documented_input(model, "unknown", made, gen) is None


def test_oneformer_gets_task_tokens_of_its_configured_length_and_runs():
    from transformers import OneFormerModel

    config = tiny_config("oneformer")
    torch.manual_seed(0)
    model = OneFormerModel(config).eval()
    inputs = forward_inputs(model, "base", torch.Generator().manual_seed(0), every_modality=True)
    assert inputs["task_inputs"].shape == (2, config.task_seq_len)
    with torch.no_grad():
        out = model(**inputs)
    assert torch.isfinite(out.transformer_decoder_object_queries).all()


def test_a_staged_backbone_keeps_its_outputs_and_a_layered_one_derives_them_again():
    staged = shrink_dict({"depths": [2, 2, 18, 2], "out_features": ["stage1", "stage4"]})
    assert staged["out_features"] == ["stage1", "stage4"]
    layered = shrink_dict({"num_hidden_layers": 12, "out_indices": [2, 5, 8, 11]})
    assert "out_indices" not in layered


def test_an_audio_encoder_gets_all_frames_valid_where_forward_reads_the_mask():
    from transformers import AudioFlamingo3Encoder

    model = AudioFlamingo3Encoder(tiny_config("audioflamingo3_encoder")).eval()
    inputs = forward_inputs(model, "base", torch.Generator().manual_seed(0), every_modality=True)
    assert inputs["input_features_mask"].all()
    with torch.no_grad():
        assert torch.isfinite(model(**inputs).last_hidden_state).all()
