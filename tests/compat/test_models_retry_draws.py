"""A CPU training step the model battery retries another way (the head's own labels do not fit:
a generic loss instead) must not leave the failed attempt's random draws for neuron to replay:
omniasr_ctc's CPU run drew 4 times (2 per attempt), its neuron run 2, a false mismatch."""

import torch
from torch.testing import assert_close

from torchneuron.compat.random_draws import RandomDraws


def _step(device):
    torch.manual_seed(0)
    x = torch.ones(4, 8, device=device)
    return torch.nn.functional.dropout(x, p=0.5, training=True) * torch.rand(4, 1, device=device)


def test_discarded_draws_of_a_failed_attempt_are_not_replayed():
    draws = RandomDraws()
    with draws.recording():
        _step("cpu")  # the attempt that failed
        draws.discard()
        expected = _step("cpu")  # the retry
    assert len(draws) == 2
    with draws.replaying():
        got = _step("neuron")
    assert_close(got.cpu(), expected)


def test_without_discarding_the_replay_counts_the_failed_attempt():
    import pytest

    from torchneuron.compat.judge import Mismatch

    draws = RandomDraws()
    with draws.recording():
        _step("cpu")
        _step("cpu")
    with pytest.raises(Mismatch, match="neuron drew 2 times, the CPU 4"):
        with draws.replaying():
            _step("neuron")
