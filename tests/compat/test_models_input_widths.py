"""Inputs wider than any config size says (stacked frames, extra columns) take the width the
model's first matrix product names (or a sum on their last axis, or a multiple of a window the
model requires), and only where such a width lets the model run."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from torchneuron.compat.models.catalog import by_type  # noqa: E402
from torchneuron.compat.models.check import _runs_on_cpu, build_tiny  # noqa: E402
from torchneuron.compat.models.input_widths import (fit_input_width, input_widths,  # noqa: E402
                                                    with_input_widths)
from torchneuron.compat.models.inputs import forward_inputs  # noqa: E402


def _product_error(got: int, want: int) -> RuntimeError:
    return RuntimeError(f"mat1 and mat2 shapes cannot be multiplied (128x{got} and {want}x64)")


def test_the_input_as_wide_as_the_product_takes_the_weights_width():
    model = torch.nn.Linear(4, 4)
    inputs = {"input_ids": torch.zeros(2, 8, dtype=torch.long), "features": torch.randn(2, 64, 80)}
    assert fit_input_width(model, inputs, _product_error(80, 320))
    assert input_widths(model) == {"features": 320}
    wide = with_input_widths(model, inputs)["features"]
    assert wide.shape == (2, 64, 320)
    torch.testing.assert_close(wide[..., :80], inputs["features"])  # repeated, then cut
    assert not fit_input_width(model, inputs, _product_error(80, 320))  # fitted once only


def test_a_model_that_drops_leading_columns_gets_the_difference_on_its_only_float_input():
    model = torch.nn.Linear(4, 4)
    inputs = {"patches": torch.randn(2, 8, 64), "decoder_input_ids": torch.zeros(2, 5, dtype=torch.long)}
    assert fit_input_width(model, inputs, _product_error(62, 64))
    assert input_widths(model) == {"patches": 66}
    assert with_input_widths(model, inputs)["patches"].shape == (2, 8, 66)


def test_of_several_inputs_as_wide_the_companion_made_after_the_main_input_is_fitted():
    model = torch.nn.Linear(4, 4)
    inputs = {"noise_embeds": torch.randn(2, 8, 64), "context_hidden_states": torch.randn(2, 8, 64)}
    assert fit_input_width(model, inputs, _product_error(64, 128))
    assert input_widths(model) == {"context_hidden_states": 128}


def test_other_errors_and_unclear_inputs_fit_nothing():
    model = torch.nn.Linear(4, 4)
    two = {"a": torch.randn(2, 8, 64), "b": torch.randn(2, 8, 32)}
    assert not fit_input_width(model, two, _product_error(62, 64))  # which one feeds it?
    assert not fit_input_width(model, two, RuntimeError("size of tensor a (8) must match b (9)"))
    assert not fit_input_width(model, two, KeyError("mat1 and mat2 shapes cannot be multiplied "
                                                    "(1x64 and 32x1)"))
    sum_on_another_axis = RuntimeError("The size of tensor a (8) must match the size of tensor b "
                                       "(16) at non-singleton dimension 1")
    assert not fit_input_width(model, two, sum_on_another_axis)
    assert input_widths(model) == {}


def test_a_sum_on_the_last_axis_and_a_required_multiple_fit_that_axis():
    model = torch.nn.Linear(4, 4)
    inputs = {"features": torch.randn(2, 64, 80)}
    sum_error = RuntimeError("The size of tensor a (80) must match the size of tensor b (560) at "
                             "non-singleton dimension 2")
    assert fit_input_width(model, inputs, sum_error) and input_widths(model) == {"features": 560}
    model = torch.nn.Linear(4, 4)
    windows = ValueError("Encoder expects `padded_feature_length` to be a multiple of "
                         "`n_window * 2` (100), but got 80.")
    assert fit_input_width(model, inputs, windows) and input_widths(model) == {"features": 100}


class _Widens(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied (16x{x.shape[-1]} and "
                           f"{x.shape[-1] + 1}x4)")  # never satisfied


def test_a_width_that_does_not_make_the_model_run_is_not_kept(monkeypatch):
    import torchneuron.compat.models.check as check

    monkeypatch.setattr(check, "forward_inputs", lambda *a, **k: {"x": torch.randn(2, 8)})
    model = _Widens()
    assert not _runs_on_cpu(model, by_type("bert"), 0, "as documented")
    assert input_widths(model) == {}


def test_granite_speech_5_runs_on_features_four_times_its_mel_bins():
    model, _, _, every_modality, layout = build_tiny(by_type("granite_speech5_encoder"))
    inputs = forward_inputs(model, "base", torch.Generator().manual_seed(0), every_modality, layout)
    assert inputs["input_features"].shape[-1] == 4 * model.config.num_mel_bins
    with torch.no_grad():
        assert torch.isfinite(model(**inputs).last_hidden_state).all()


def test_a_length_that_is_not_a_multiple_of_a_frame_fits_the_next_multiple():
    model = torch.nn.Linear(4, 4)
    inputs = {"input_values": torch.randn(2, 4000)}
    frames = ValueError("`input_values` length 4000 is not a multiple of 1920. Prepare the audio")
    assert fit_input_width(model, inputs, frames) and input_widths(model) == {"input_values": 5760}
