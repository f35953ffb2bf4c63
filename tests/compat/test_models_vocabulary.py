"""Token ids come from the vocabulary the config names, in its sub-configs too (a text-to-speech
model's model_config); a config that names no vocabulary at all (CANINE embeds hashed Unicode
code points) gets byte values; compound-scaled networks keep their top width in proportion to
the width coefficient (EfficientNet)."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from torchneuron.compat.models.input_basics import (  # noqa: E402
    BYTE_VALUES, NoInputRecipe, vocab_size)
from torchneuron.compat.models.shrink import shrink_dict  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402


class _Config:
    def __init__(self, **d):
        self.__dict__.update(d)
        self._d = d

    def to_dict(self):
        return self._d


def test_a_config_without_any_vocabulary_takes_byte_values():
    assert vocab_size(_Config(type_vocab_size=16, num_hash_buckets=16384)) == BYTE_VALUES


def test_a_config_with_an_unreachable_vocabulary_is_refused():
    with pytest.raises(NoInputRecipe):
        vocab_size(_Config(semantic_config={"input_vocab_size": 10048}))


def test_tiny_canine_classifies_bytes_on_the_cpu():
    from transformers import CanineForSequenceClassification

    model = CanineForSequenceClassification(tiny_config("canine")).eval()
    ids = torch.randint(0, vocab_size(model.config), (2, 8))
    with torch.no_grad():
        assert model(input_ids=ids).logits.shape == (2, 2)


def test_the_top_width_follows_the_width_coefficient():
    out = shrink_dict({"width_coefficient": 2.0, "hidden_dim": 2560}, "every width")
    assert out["width_coefficient"] == 1.0 and out["hidden_dim"] == 1280
    assert shrink_dict({"hidden_dim": 2560})["hidden_dim"] == 64  # no scaling: the width rule
