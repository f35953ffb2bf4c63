"""The last shrink profile keeps the factor of three a default hidden size has, with the widths
that are whole fractions of it (LiLT's and LayoutLMv3's six box embeddings), and a stack's
layer count keeps the multiple the model's layer count is of it (HRM-Text's cache slots)."""

import copy

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

import torchneuron  # noqa: E402,F401 - registers the neuron device
from torchneuron.compat.models.catalog import by_type  # noqa: E402
from torchneuron.compat.models.check import build_tiny  # noqa: E402
from torchneuron.compat.models.hidden_factors import PROFILE, keep_factor_of_three  # noqa: E402
from torchneuron.compat.models.inputs import forward_inputs  # noqa: E402
from torchneuron.compat.models.shrink import HIDDEN, PROFILES, shrink_dict  # noqa: E402


def test_a_hidden_size_with_a_factor_of_three_keeps_it_and_its_fractions_follow():
    d = {"hidden_size": 768, "coordinate_size": 128, "shape_size": 128, "head_size": 100,
         "max_2d_position_embeddings": 1024}
    out = shrink_dict(d, PROFILE)
    assert out["hidden_size"] == 96 and 4 * out["coordinate_size"] + 2 * out["shape_size"] == 96
    assert out["head_size"] == 100  # no whole fraction of 768: no rule for it here
    assert shrink_dict(d, PROFILES[0])["hidden_size"] == HIDDEN  # the other profiles keep 64


def test_a_hidden_size_without_a_factor_of_three_is_left_as_shrunk():
    out = {"hidden_size": HIDDEN}
    keep_factor_of_three({"hidden_size": 4096}, out, HIDDEN)
    assert out == {"hidden_size": HIDDEN}
    assert PROFILES[-1] == PROFILE  # tried last: no model that runs with another one changes


def test_a_stacks_layer_count_shrinks_and_the_model_keeps_its_multiple():
    out = shrink_dict({"num_hidden_layers": 128, "num_layers_per_stack": 16})
    assert out == {"num_hidden_layers": 16, "num_layers_per_stack": 2}
    # a count that does not divide the layer count is no stack of it
    assert shrink_dict({"num_hidden_layers": 12, "num_layers_per_stack": 5})["num_hidden_layers"] == 2


@pytest.mark.parametrize("model_type", ["lilt", "hrm_text"])
def test_the_model_runs_on_neuron_as_on_the_cpu(model_type):
    arch = by_type(model_type)
    model, _, profile, every_modality, layout = build_tiny(arch)
    assert profile == (PROFILE if model_type == "lilt" else PROFILES[0])
    inputs = forward_inputs(model, arch.head, torch.Generator().manual_seed(0), every_modality, layout)
    with torch.no_grad():
        expected = model(**inputs).logits
        dev = copy.deepcopy(model).to("neuron")
        got = dev(**{k: v.to("neuron") for k, v in inputs.items()}).logits
    torch.testing.assert_close(got.cpu(), expected)
