"""A mask of a waveform's samples, as the Perception Encoder's audio types document one:
sized from the input it names ("padding samples of `input_values`", read through the channel
axis the "audio transposed" layout adds), 1 (keep) where its documentation's list says 1 is
"not masked", integers whatever its documented type, and beside it a waveform of whole hops
of the codec, so the model's every-hop-th mask value is one per frame."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from torchneuron.compat.models.documented_shapes import documented_input, masks_samples_of  # noqa: E402
from torchneuron.compat.models.input_basics import AUDIO_SAMPLES  # noqa: E402
from torchneuron.compat.models.main_input import main_input  # noqa: E402


class _Config:
    sub_configs = {"codec_config": None}

    def __init__(self, hop: int | None):
        self.codec_config = _Codec(hop)


class _Codec:
    sub_configs: dict = {}

    def __init__(self, hop):
        self.hop_length = hop


class _Masked(torch.nn.Module):
    def forward(self, input_ids, input_values, padding_mask, noise_mask):
        r"""
        input_ids (`torch.Tensor` of shape `(batch_size, sequence_length)`):
            Text.
        input_values (`torch.Tensor` of shape `(batch_size, sequence_length)`):
            Waveform.
        padding_mask (`torch.Tensor` of shape `(batch_size, sequence_length)`, *optional*):
            Mask to avoid performing attention on padding samples of `input_values`. Mask values selected in `[0, 1]`:

            - 1 for samples that are **not masked**,
            - 0 for samples that are **masked**.
        noise_mask (`torch.Tensor` of shape `(batch_size, sequence_length)`):
            Which samples get noise.
        """


class _Unmasked(torch.nn.Module):
    def forward(self, input_values):
        r"""
        input_values (`torch.Tensor` of shape `(batch_size, sequence_length)`):
            Waveform.
        """


def _model(cls, hop=None):
    model = cls()
    model.config = _Config(hop)
    return model


def test_a_mask_of_samples_is_sized_from_them_and_keeps_every_one():
    model = _model(_Masked)
    gen = torch.Generator().manual_seed(0)
    made = {"input_ids": torch.zeros(2, 8, dtype=torch.long),
            "input_values": torch.randn(2, 1, 3840)}  # the "audio transposed" layout's channel
    mask = documented_input(model, "padding_mask", made, gen)
    assert mask.shape == (2, 3840) and mask.dtype == torch.long and mask.all()
    noise = documented_input(model, "noise_mask", made, gen)  # says nothing: a float tensor
    assert noise.is_floating_point()


def test_a_waveform_beside_a_mask_of_its_samples_is_whole_hops_of_the_codec():
    gen = torch.Generator().manual_seed(0)
    assert masks_samples_of(_model(_Masked), "input_values")
    assert not masks_samples_of(_model(_Unmasked), "input_values")
    masked = main_input(_model(_Masked, hop=1920), gen, "input_values")["input_values"]
    assert masked.shape == (2, 3840)  # two hops of 1920, not 4000 samples
    unmasked = main_input(_model(_Unmasked, hop=1920), gen, "input_values")["input_values"]
    assert unmasked.shape == (2, AUDIO_SAMPLES)  # no mask to keep aligned: as before
    too_long = main_input(_model(_Masked, hop=AUDIO_SAMPLES + 1), gen, "input_values")
    assert too_long["input_values"].shape == (2, AUDIO_SAMPLES)
