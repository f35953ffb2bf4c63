"""A shrink profile leaves the sizes a config derives when unset (a None default filled in
__post_init__) unset again where no rule shrank them, so the config derives them from the
shrunk sizes (X-Codec's codebook_dim is its two towers' hidden sizes together)."""

import copy
import dataclasses

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
import transformers  # noqa: E402

import torchneuron  # noqa: E402,F401 - registers the neuron device
from torchneuron.compat.models.derived_again import PROFILE, unset_derived_sizes  # noqa: E402
from torchneuron.compat.models.shrink import PROFILES  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402


@dataclasses.dataclass
class _Config:
    hidden_size: int = 768
    codebook_dim: int | None = None
    head_dim: int | None = None
    vocab_size: int = 1000


def test_only_sizes_the_class_leaves_unset_and_no_rule_shrank_are_unset_again():
    full = {"hidden_size": 768, "codebook_dim": 1024, "head_dim": 64, "vocab_size": 1000}
    small = {"hidden_size": 64, "codebook_dim": 1024, "head_dim": 16, "vocab_size": 256}
    unset_derived_sizes(_Config, full, small)
    assert small == {"hidden_size": 64, "codebook_dim": None, "head_dim": 16, "vocab_size": 256}
    unset_derived_sizes(dict, full, small)  # no dataclass: nothing known to be derived
    assert small["head_dim"] == 16


def test_xcodec_derives_its_codebook_width_again_only_in_this_profile():
    assert PROFILES.index(PROFILE) > PROFILES.index("unset sizes set")
    assert tiny_config("xcodec").codebook_dim == 1024
    config = tiny_config("xcodec", PROFILE)
    assert config.codebook_dim == config.acoustic_model_config.hidden_size \
        + config.semantic_model_config.hidden_size


def test_xcodec_runs_on_neuron_as_on_the_cpu():
    torch.manual_seed(0)
    model = transformers.XcodecModel(tiny_config("xcodec", PROFILE)).eval()
    audio = torch.randn(2, 1, 4000, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model(input_values=audio)
        got = copy.deepcopy(model).to("neuron")(input_values=audio.to("neuron"))
    torch.testing.assert_close(got.audio_codes.cpu(), expected.audio_codes)
    torch.testing.assert_close(got.audio_values.cpu(), expected.audio_values)
