"""The README's demo (`make demo`): its training loop on neuron gives the CPU's losses."""

import argparse
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from demo.train_gpt import load_corpus, train  # noqa: E402


def test_demo_losses_match_cpu():
    data, vocab = load_corpus()
    args = argparse.Namespace(steps=4, batch=4, block=32, seed=1337)
    neuron_losses, _ = train("neuron", data, vocab, args)
    cpu_losses, _ = train("cpu", data, vocab, args)
    assert neuron_losses[-1] < neuron_losses[0]
    torch.testing.assert_close(neuron_losses, cpu_losses)
