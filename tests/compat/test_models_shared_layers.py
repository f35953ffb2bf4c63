"""The last layers that reuse an earlier layer's key/value cache (Gemma 3n's
num_kv_shared_layers: 15 of 35) are shrunk after the layers that make the caches, not over them:
shrunk like any layer count they were every layer, and the config refused it ("The set of layer
types producing a cache is different than the set of layer types using them")."""

import copy

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
import transformers  # noqa: E402

import torchneuron  # noqa: E402,F401 - registers the neuron device
from torchneuron.compat.models.shrink import shrink_dict  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402


def test_shared_layers_follow_the_layers_that_make_their_caches():
    kinds = (["sliding"] * 4 + ["full"]) * 7
    full = {"num_hidden_layers": 35, "num_kv_shared_layers": 15, "layer_types": kinds,
            "sparsity": [0.9] * 10 + [0.0] * 25}
    small = shrink_dict(full)
    assert small["num_hidden_layers"] == 4 and small["num_kv_shared_layers"] == 2
    assert small["layer_types"] == ["sliding", "full", "sliding", "full"]
    assert small["sparsity"] == [0.9] * 4  # the kept layers 0 and 4, then again


def test_a_shared_count_that_stays_below_the_layers_is_left_as_it_is():
    full = {"num_hidden_layers": 2, "num_kv_shared_layers": 1, "layer_types": ["a", "b"]}
    assert shrink_dict(full) == full
    no_sharing = {"num_hidden_layers": 35, "num_kv_shared_layers": 0}
    assert shrink_dict(no_sharing) == {"num_hidden_layers": 2, "num_kv_shared_layers": 0}


def test_gemma3n_text_with_shared_layers_runs_on_neuron_as_on_the_cpu():
    config = tiny_config("gemma3n_text")
    assert 0 < config.num_kv_shared_layers < config.num_hidden_layers
    torch.manual_seed(0)
    model = transformers.Gemma3nForCausalLM(config).eval()
    ids = torch.randint(3, 200, (2, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model(input_ids=ids).logits
        got = copy.deepcopy(model).to("neuron")(input_ids=ids.to("neuron")).logits
    torch.testing.assert_close(got.cpu(), expected)
