"""The pytest plugin of torch.neuron.expect (registered through the `pytest11` entry point, so
any pytest run in an environment with torchneuron has it):

    @pytest.mark.neuron_expect(syncs=0, host_fallbacks=0)
    def test_step(): ...

checks the test's body against the contract, as `with torch.neuron.expect(...)` would, and
NEURON_EXPECT=... applies its contract to every test of the run (a marker's keys override it).
Nothing torch-related is imported until a test needs it.
"""

from __future__ import annotations

from typing import Any

import pytest

_MARKER = "neuron_expect"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{_MARKER}(**bounds): the test may cost at most these bounds on Trainium "
                   "(torch.neuron.expect's keys: host_fallbacks, syncs, recompiles, signatures, "
                   "dynamic_shapes, peak_memory)")


def _run_contract() -> dict[str, Any]:
    """NEURON_EXPECT's bounds, read once the first test runs (reading the configuration is not
    initializing the device); the process-wide check at exit is then left to the tests."""
    import os

    if "NEURON_EXPECT" not in os.environ:  # no configuration read for runs that do not use it
        return {}
    from torchneuron.device import contract
    from torchneuron.runtime import config

    contract.per_test = True
    return dict(config.current().expect)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    marker = item.get_closest_marker(_MARKER)
    bounds = _run_contract()
    if marker is not None:
        if marker.args:
            raise TypeError(f"@pytest.mark.{_MARKER} takes keyword bounds only, got "
                            f"{marker.args!r}")
        bounds.update(marker.kwargs)
    if not bounds:
        return (yield)
    from torchneuron.device import accounting, contract

    checked = contract.validate(bounds)
    with accounting.measure() as block:
        result = yield  # a failing test raises here: its own error is reported, unchecked
    contract.check(block.summary, checked, f"{item.nodeid}: neuron_expect")
    return result
