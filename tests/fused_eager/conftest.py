import pytest

from torchneuron.fused_eager import compile_chain

from . import chains


class Compiled:
    """Each shared chain compiled for `device` at most once per session (on first use)."""

    def __init__(self, device):
        self.device = device
        self._done = {}

    def __getitem__(self, name):
        if name not in self._done:
            chain, _ = chains.ALL[name]()
            self._done[name] = compile_chain(chain, device=self.device)
        return self._done[name]


@pytest.fixture(scope="session")
def compiled():
    return Compiled("cpu")


@pytest.fixture(scope="session")
def compiled_neuron():
    return Compiled("neuron")
