import pytest

from torchneuron.fusion import compile_chain

from . import chains


class Compiled:
    """Each shared chain compiled at most once per session (on first use)."""

    def __init__(self):
        self._done = {}

    def __getitem__(self, name):
        if name not in self._done:
            chain, _ = chains.ALL[name]()
            self._done[name] = compile_chain(chain)
        return self._done[name]


@pytest.fixture(scope="session")
def compiled():
    return Compiled()
